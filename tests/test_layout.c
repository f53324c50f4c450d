/* Layout and indexing ops through the public API: gather, scatter_add, index_select, one_hot,
 * cat, stack, split and chunk. References are computed here by index arithmetic on row-major
 * host arrays (strided inputs are described by their logical row-major values). */
#include "harness.h"

/* ---- host references ------------------------------------------------------------------------ */

static int64_t numel_of(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

static void unravel(int64_t lin, const int64_t *shape, int ndim, int64_t *coord) {
    for (int d = ndim - 1; d >= 0; d--) {
        coord[d] = lin % shape[d];
        lin /= shape[d];
    }
}

static int64_t ravel(const int64_t *coord, const int64_t *shape, int ndim) {
    int64_t lin = 0;
    for (int d = 0; d < ndim; d++)
        lin = lin * shape[d] + coord[d];
    return lin;
}

/* out (index's shape) = x[coord with coord[dim] = index[coord]] */
static void ref_gather(const double *x, const int64_t *xs, const int64_t *idx, const int64_t *is,
                       int ndim, int dim, double *out) {
    int64_t n = numel_of(is, ndim), c[CN_MAX_DIMS];
    for (int64_t p = 0; p < n; p++) {
        unravel(p, is, ndim, c);
        c[dim] = idx[p];
        out[p] = x[ravel(c, xs, ndim)];
    }
}

/* out (x's shape) = x, then out[coord with coord[dim] = index[coord]] += src[coord] over index's
 * positions; src has shape ss (>= index's). */
static void ref_scatter_add(const double *x, const int64_t *xs, const int64_t *idx,
                            const int64_t *is, const double *src, const int64_t *ss, int ndim,
                            int dim, double *out) {
    memcpy(out, x, sizeof(double) * (size_t)numel_of(xs, ndim));
    int64_t n = numel_of(is, ndim), c[CN_MAX_DIMS];
    for (int64_t p = 0; p < n; p++) {
        unravel(p, is, ndim, c);
        double v = src[ravel(c, ss, ndim)];
        c[dim] = idx[p];
        out[ravel(c, xs, ndim)] += v;
    }
}

/* out (x's shape with dim of len) = x[coord with coord[dim] = idx[coord[dim]]] */
static void ref_index_select(const double *x, const int64_t *xs, int ndim, int dim,
                             const int64_t *idx, int64_t len, double *out) {
    int64_t os[CN_MAX_DIMS], c[CN_MAX_DIMS];
    memcpy(os, xs, sizeof(int64_t) * (size_t)ndim);
    os[dim] = len;
    int64_t n = numel_of(os, ndim);
    for (int64_t p = 0; p < n; p++) {
        unravel(p, os, ndim, c);
        c[dim] = idx[c[dim]];
        out[p] = x[ravel(c, xs, ndim)];
    }
}

/* Concatenation of n row-major pieces along dim. */
static void ref_cat(const double *const *pieces, const int64_t (*shapes)[CN_MAX_DIMS], int n,
                    int ndim, int dim, double *out, int64_t *out_shape) {
    memcpy(out_shape, shapes[0], sizeof(int64_t) * (size_t)ndim);
    out_shape[dim] = 0;
    for (int k = 0; k < n; k++)
        out_shape[dim] += shapes[k][dim];
    int64_t total = numel_of(out_shape, ndim), c[CN_MAX_DIMS];
    for (int64_t p = 0; p < total; p++) {
        unravel(p, out_shape, ndim, c);
        int k = 0;
        while (c[dim] >= shapes[k][dim])
            c[dim] -= shapes[k++][dim];
        out[p] = pieces[k][ravel(c, shapes[k], ndim)];
    }
}

/* The logical row-major values of the transpose (dims a, b) of a row-major host array. */
static void host_transpose(const double *x, const int64_t *xs, int ndim, int a, int b, double *out,
                           int64_t *out_shape) {
    memcpy(out_shape, xs, sizeof(int64_t) * (size_t)ndim);
    out_shape[a] = xs[b];
    out_shape[b] = xs[a];
    int64_t n = numel_of(xs, ndim), c[CN_MAX_DIMS];
    for (int64_t p = 0; p < n; p++) {
        unravel(p, out_shape, ndim, c);
        int64_t t = c[a];
        c[a] = c[b];
        c[b] = t;
        out[p] = x[ravel(c, xs, ndim)];
    }
}

/* ---- tensor helpers ------------------------------------------------------------------------- */

static cn_tensor *i64_tensor(const int64_t *v, const int64_t *shape, int ndim) {
    return cn_from_data(v, shape, ndim, CN_I64, cn_cpu());
}

/* Deterministic pseudo-random values (an LCG), exact in every dtype tested (small integers). */
static uint64_t lcg_state = 12345;
static int64_t lcg(int64_t mod) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int64_t)((lcg_state >> 33) % (uint64_t)mod);
}

static void fill_values(double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)(lcg(200) - 100);
}

static void fill_index(int64_t *v, int64_t n, int64_t bound) {
    for (int64_t i = 0; i < n; i++)
        v[i] = lcg(bound);
}

/* Checks an int-returning call (split / chunk) failed with status, naming needle. */
#define CHECK_FAILS_INT(expr, status, needle)                                                      \
    do {                                                                                           \
        cn_clear_error();                                                                          \
        CHECK((expr) == -1);                                                                       \
        CHECK(cn_last_status() == (status));                                                       \
        if (!strstr(cn_last_error(), (needle))) {                                                  \
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,            \
                    cn_last_error(), (needle));                                                    \
            th_checks_failed++;                                                                    \
        }                                                                                          \
        cn_clear_error();                                                                          \
    } while (0)

/* ---- gather --------------------------------------------------------------------------------- */

static void test_gather_2d_both_dims(void) {
    const double xh[] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
    const int64_t xs[] = {3, 4};
    cn_tensor *x = th_tensor(xh, xs, 2, CN_F32);

    /* dim 1: out[i][j] = x[i][index[i][j]] (hand-computed) */
    const int64_t i1[] = {3, 0, 1, 1, 2, 3};
    const int64_t is1[] = {3, 2};
    cn_tensor *idx1 = i64_tensor(i1, is1, 2);
    cn_tensor *g1 = cn_gather(x, 1, idx1);
    const double w1[] = {3, 0, 11, 11, 22, 23};
    th_check_shape("gather dim 1", g1, is1, 2);
    CHECK(g1 && cn_dtype_of(g1) == CN_F32);
    th_check_values("gather dim 1", g1, w1, 6, 0);
    cn_tensor *g1n = cn_gather(x, -1, idx1);
    th_check_values("gather dim -1", g1n, w1, 6, 0);

    /* dim 0 with fewer columns than x: out[i][j] = x[index[i][j]][j] */
    const int64_t i0[] = {2, 0, 1, 0, 0, 2};
    const int64_t is0[] = {2, 3};
    cn_tensor *idx0 = i64_tensor(i0, is0, 2);
    cn_tensor *g0 = cn_gather(x, 0, idx0);
    const double w0[] = {20, 1, 12, 0, 1, 22};
    th_check_shape("gather dim 0", g0, is0, 2);
    th_check_values("gather dim 0", g0, w0, 6, 0);

    cn_release(g0);
    cn_release(idx0);
    cn_release(g1n);
    cn_release(g1);
    cn_release(idx1);
    cn_release(x);
}

static void test_gather_3d_every_dim_and_dtype(void) {
    const int64_t xs[] = {3, 4, 5};
    double xh[60];
    fill_values(xh, 60);
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8};
    for (int dim = 0; dim < 3; dim++) {
        /* the index is smaller than x off dim (PyTorch allows it) and longer on dim */
        int64_t is[] = {2, 3, 4};
        is[dim] = 6;
        int64_t n = numel_of(is, 3);
        int64_t ih[6 * 3 * 4];
        fill_index(ih, n, xs[dim]);
        cn_tensor *idx = i64_tensor(ih, is, 3);
        for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
            double xv[60];
            for (int i = 0; i < 60; i++) /* u8 holds no negatives */
                xv[i] = dts[k] == CN_U8 ? xh[i] + 100 : xh[i];
            double wv[6 * 3 * 4];
            ref_gather(xv, xs, ih, is, 3, dim, wv);
            cn_tensor *x = th_tensor(xv, xs, 3, dts[k]);
            cn_tensor *g = cn_gather(x, dim, idx);
            char what[64];
            snprintf(what, sizeof what, "gather 3-D dim %d %s", dim, cn_dtype_name(dts[k]));
            th_check_shape(what, g, is, 3);
            CHECK(g && cn_dtype_of(g) == dts[k]);
            th_check_values(what, g, wv, n, 0);
            cn_release(g);
            cn_release(x);
        }
        cn_release(idx);
    }
}

static void test_gather_strided_inputs(void) {
    /* x = transpose of a [5, 4] base: [4, 5]; index = a column-slice of a [4, 6] i64 tensor */
    const int64_t bs[] = {5, 4};
    double bh[20];
    fill_values(bh, 20);
    cn_tensor *base = th_tensor(bh, bs, 2, CN_F64);
    cn_tensor *x = cn_transpose(base, 0, 1);
    double xh[20];
    int64_t xs[2];
    host_transpose(bh, bs, 2, 0, 1, xh, xs);

    const int64_t ibs[] = {4, 6};
    int64_t ibh[24];
    fill_index(ibh, 24, 4); /* the index reaches along dim 0 (size 4) */
    cn_tensor *ibase = i64_tensor(ibh, ibs, 2);
    cn_tensor *idx = cn_slice(ibase, 1, 1, 6, 2); /* [4, 3], columns 1, 3, 5 */
    CHECK(idx && !cn_is_contiguous(idx));
    int64_t ih[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            ih[i * 3 + j] = ibh[i * 6 + 1 + 2 * j];
    const int64_t is[] = {4, 3};
    double want[12];
    ref_gather(xh, xs, ih, is, 2, 0, want);
    cn_tensor *g = cn_gather(x, 0, idx);
    th_check_values("gather strided dim 0", g, want, 12, 0);

    /* along dim 1, with the index transposed too: [3, 4] values in 0..4 */
    int64_t jh[12];
    fill_index(jh, 12, 5);
    const int64_t js[] = {4, 3};
    cn_tensor *jb = i64_tensor(jh, js, 2);
    cn_tensor *jt = cn_transpose(jb, 0, 1); /* [3, 4] */
    int64_t jth[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            jth[i * 4 + j] = jh[j * 3 + i];
    const int64_t jts[] = {3, 4};
    ref_gather(xh, xs, jth, jts, 2, 1, want);
    cn_tensor *g2 = cn_gather(x, 1, jt);
    th_check_shape("gather strided dim 1", g2, jts, 2);
    th_check_values("gather strided dim 1", g2, want, 12, 0);

    /* an index expanded along a dim (stride 0) */
    const int64_t rowh[] = {2, 4};
    const int64_t rows[] = {1, 2};
    cn_tensor *row = i64_tensor(rowh, rows, 2);
    const int64_t es[] = {4, 2};
    cn_tensor *ex = cn_expand(row, es, 2); /* out[i][j] = x[i][rowh[j]] */
    const double we[] = {xh[0 * 5 + 2], xh[0 * 5 + 4], xh[1 * 5 + 2], xh[1 * 5 + 4],
                         xh[2 * 5 + 2], xh[2 * 5 + 4], xh[3 * 5 + 2], xh[3 * 5 + 4]};
    cn_tensor *g3 = cn_gather(x, 1, ex);
    th_check_values("gather expanded index", g3, we, 8, 0);

    cn_release(g3);
    cn_release(ex);
    cn_release(row);
    cn_release(g2);
    cn_release(jt);
    cn_release(jb);
    cn_release(g);
    cn_release(idx);
    cn_release(ibase);
    cn_release(x);
    cn_release(base);
}

/* Large enough for the parallel path (>= 32768 outputs). */
static void test_gather_large(void) {
    const int64_t xs[] = {300, 200}, is[] = {300, 150};
    int64_t nx = 300 * 200, ni = 300 * 150;
    double *xh = malloc(sizeof(double) * (size_t)nx), *want = malloc(sizeof(double) * (size_t)ni);
    int64_t *ih = malloc(sizeof(int64_t) * (size_t)ni);
    for (int64_t i = 0; i < nx; i++)
        xh[i] = (double)(i % 1000);
    fill_index(ih, ni, 200);
    ref_gather(xh, xs, ih, is, 2, 1, want);
    cn_tensor *x = th_tensor(xh, xs, 2, CN_F32);
    cn_tensor *idx = i64_tensor(ih, is, 2);
    cn_tensor *g = cn_gather(x, 1, idx);
    th_check_values("gather large", g, want, ni, 0);
    cn_release(g);
    cn_release(idx);
    cn_release(x);
    free(ih);
    free(want);
    free(xh);
}

/* ---- scatter_add ---------------------------------------------------------------------------- */

static void test_scatter_add_hand_computed(void) {
    const double xh[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
    const int64_t xs[] = {2, 5};
    cn_tensor *x = th_tensor(xh, xs, 2, CN_F32);
    /* duplicates within a row accumulate */
    const int64_t ih[] = {0, 4, 0, 3, 3, 3};
    const int64_t is[] = {2, 3};
    cn_tensor *idx = i64_tensor(ih, is, 2);
    const double sh[] = {10, 20, 30, 1, 2, 3};
    cn_tensor *src = th_tensor(sh, is, 2, CN_F32);
    cn_tensor *r = cn_scatter_add(x, 1, idx, src);
    const double want[] = {41, 1, 1, 1, 21, 2, 2, 2, 8, 2};
    th_check_shape("scatter_add", r, xs, 2);
    CHECK(r && cn_dtype_of(r) == CN_F32);
    th_check_values("scatter_add", r, want, 10, 0);
    /* x itself is unchanged */
    th_check_values("scatter_add input", x, xh, 10, 0);

    /* dim 0: index taller than x along dim (allowed: only off-dim sizes are bounded by x) */
    const int64_t i0[] = {1, 0, 0, 1, 1, 1, 0, 1, 1, 0};
    const int64_t is0[] = {5, 2};
    cn_tensor *idx0 = i64_tensor(i0, is0, 2);
    const double s0[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    cn_tensor *src0 = th_tensor(s0, is0, 2, CN_F32);
    cn_tensor *r0 = cn_scatter_add(x, 0, idx0, src0);
    /* col 0: rows get 1->row1, 3->row0, 5->row1, 7->row0, 9->row1: row0 += 10, row1 += 15
     * col 1: 2->row0, 4->row1, 6->row1, 8->row1, 10->row0: row0 += 12, row1 += 18 */
    const double w0[] = {11, 13, 1, 1, 1, 17, 20, 2, 2, 2};
    th_check_values("scatter_add dim 0", r0, w0, 10, 0);

    cn_release(r0);
    cn_release(src0);
    cn_release(idx0);
    cn_release(r);
    cn_release(src);
    cn_release(idx);
    cn_release(x);
}

static void test_scatter_add_3d_dtypes_and_strides(void) {
    const int64_t xs[] = {3, 4, 5};
    double xh[60];
    fill_values(xh, 60);
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_I32, CN_I64};
    for (int dim = 0; dim < 3; dim++) {
        int64_t is[] = {2, 3, 4};
        is[dim] = 7;
        int64_t n = numel_of(is, 3);
        int64_t ih[7 * 3 * 4];
        double sh[7 * 3 * 4], want[60];
        fill_index(ih, n, xs[dim]);
        fill_values(sh, n);
        ref_scatter_add(xh, xs, ih, is, sh, is, 3, dim, want);
        cn_tensor *idx = i64_tensor(ih, is, 3);
        for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
            cn_tensor *x = th_tensor(xh, xs, 3, dts[k]);
            cn_tensor *src = th_tensor(sh, is, 3, dts[k]);
            cn_tensor *r = cn_scatter_add(x, dim - 3, idx, src); /* negative dim */
            char what[64];
            snprintf(what, sizeof what, "scatter_add dim %d %s", dim, cn_dtype_name(dts[k]));
            th_check_shape(what, r, xs, 3);
            th_check_values(what, r, want, 60, 0);
            cn_release(r);
            cn_release(src);
            cn_release(x);
        }
        cn_release(idx);
    }

    /* strided x (a transpose), strided src (a slice) and a strided index (a transpose) */
    const int64_t bs[] = {4, 3};
    double bh[12];
    fill_values(bh, 12);
    cn_tensor *base = th_tensor(bh, bs, 2, CN_F64);
    cn_tensor *x = cn_transpose(base, 0, 1); /* [3, 4] */
    double xth[12];
    int64_t xts[2];
    host_transpose(bh, bs, 2, 0, 1, xth, xts);

    const int64_t sbs[] = {3, 8};
    double sbh[24];
    fill_values(sbh, 24);
    cn_tensor *sbase = th_tensor(sbh, sbs, 2, CN_F64);
    cn_tensor *src = cn_slice(sbase, 1, 0, 8, 2); /* [3, 4] */
    double shh[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            shh[i * 4 + j] = sbh[i * 8 + 2 * j];

    const int64_t ibs[] = {4, 3};
    int64_t ibh[12];
    fill_index(ibh, 12, 4);
    cn_tensor *ibase = i64_tensor(ibh, ibs, 2);
    cn_tensor *idx = cn_transpose(ibase, 0, 1); /* [3, 4], values in 0..3 */
    int64_t ith[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            ith[i * 4 + j] = ibh[j * 3 + i];
    const int64_t s34[] = {3, 4};
    double want[12];
    ref_scatter_add(xth, xts, ith, s34, shh, s34, 2, 1, want);
    cn_tensor *r = cn_scatter_add(x, 1, idx, src);
    th_check_values("scatter_add strided", r, want, 12, 0);
    CHECK(r && cn_is_contiguous(r));

    cn_release(r);
    cn_release(idx);
    cn_release(ibase);
    cn_release(src);
    cn_release(sbase);
    cn_release(x);
    cn_release(base);
}

/* Many duplicates per row, enough work for the parallel path. */
static void test_scatter_add_large_histogram(void) {
    const int64_t xs[] = {64, 7}, is[] = {64, 1000};
    int64_t ni = 64 * 1000;
    int64_t *ih = malloc(sizeof(int64_t) * (size_t)ni);
    double *sh = malloc(sizeof(double) * (size_t)ni);
    for (int64_t i = 0; i < ni; i++) {
        ih[i] = (i * 31 + i / 1000) % 7;
        sh[i] = (double)(i % 5);
    }
    double xh[64 * 7] = {0}, want[64 * 7];
    ref_scatter_add(xh, xs, ih, is, sh, is, 2, 1, want);
    cn_tensor *x = cn_zeros(xs, 2, CN_F32, cn_cpu());
    cn_tensor *idx = i64_tensor(ih, is, 2);
    cn_tensor *src = th_tensor(sh, is, 2, CN_F32);
    cn_tensor *r = cn_scatter_add(x, 1, idx, src);
    th_check_values("scatter_add histogram", r, want, 64 * 7, 0);
    cn_release(r);
    cn_release(src);
    cn_release(idx);
    cn_release(x);
    free(sh);
    free(ih);
}

/* ---- index_select --------------------------------------------------------------------------- */

static void test_index_select_dims_dtypes(void) {
    const double xh[] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
    const int64_t xs[] = {4, 3};
    cn_tensor *x = th_tensor(xh, xs, 2, CN_F32);
    const int64_t rows[] = {3, 0, 3};
    const int64_t rl[] = {3};
    cn_tensor *ri = i64_tensor(rows, rl, 1);
    cn_tensor *a = cn_index_select(x, 0, ri);
    const int64_t as[] = {3, 3};
    const double aw[] = {30, 31, 32, 0, 1, 2, 30, 31, 32};
    th_check_shape("index_select rows", a, as, 2);
    th_check_values("index_select rows", a, aw, 9, 0);

    const int64_t cols[] = {2, 0};
    const int64_t cl[] = {2};
    cn_tensor *ci = i64_tensor(cols, cl, 1);
    cn_tensor *b = cn_index_select(x, -1, ci);
    const int64_t bsh[] = {4, 2};
    const double bw[] = {2, 0, 12, 10, 22, 20, 32, 30};
    th_check_shape("index_select cols", b, bsh, 2);
    th_check_values("index_select cols", b, bw, 8, 0);

    /* an empty index gives an empty dim */
    const int64_t el[] = {0};
    cn_tensor *ei = i64_tensor(rows, el, 1);
    cn_tensor *e = cn_index_select(x, 0, ei);
    const int64_t es[] = {0, 3};
    th_check_shape("index_select empty", e, es, 2);

    /* 3-D, each dim, several dtypes */
    const int64_t ys[] = {3, 4, 5};
    double yh[60];
    fill_values(yh, 60);
    const cn_dtype dts[] = {CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    for (int dim = 0; dim < 3; dim++) {
        int64_t ih[6];
        fill_index(ih, 6, ys[dim]);
        const int64_t il[] = {6};
        cn_tensor *idx = i64_tensor(ih, il, 1);
        for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
            double yv[60], want[6 * 20];
            for (int i = 0; i < 60; i++)
                yv[i] = dts[k] == CN_U8 ? yh[i] + 100 : dts[k] == CN_BOOL ? (yh[i] > 0) : yh[i];
            ref_index_select(yv, ys, 3, dim, ih, 6, want);
            cn_tensor *y = th_tensor(yv, ys, 3, dts[k]);
            cn_tensor *s = cn_index_select(y, dim, idx);
            int64_t ws[] = {3, 4, 5};
            ws[dim] = 6;
            char what[64];
            snprintf(what, sizeof what, "index_select dim %d %s", dim, cn_dtype_name(dts[k]));
            th_check_shape(what, s, ws, 3);
            CHECK(s && cn_dtype_of(s) == dts[k]);
            th_check_values(what, s, want, numel_of(ws, 3), 0);
            cn_release(s);
            cn_release(y);
        }
        cn_release(idx);
    }

    cn_release(e);
    cn_release(ei);
    cn_release(b);
    cn_release(ci);
    cn_release(a);
    cn_release(ri);
    cn_release(x);
}

static void test_index_select_strided(void) {
    const int64_t bs[] = {3, 4, 5};
    double bh[60];
    fill_values(bh, 60);
    cn_tensor *base = th_tensor(bh, bs, 3, CN_F32);
    cn_tensor *x = cn_transpose(base, 0, 2); /* [5, 4, 3] */
    double xh[60];
    int64_t xs[3];
    host_transpose(bh, bs, 3, 0, 2, xh, xs);
    const int64_t ibh[] = {3, 9, 0, 9, 4, 9, 4, 9}; /* every other entry: 3, 0, 4, 4 */
    const int64_t ibs[] = {8};
    cn_tensor *ibase = i64_tensor(ibh, ibs, 1);
    cn_tensor *idx = cn_slice(ibase, 0, 0, 8, 2);
    const int64_t ih[] = {3, 0, 4, 4};
    double want0[4 * 4 * 3];
    ref_index_select(xh, xs, 3, 0, ih, 4, want0);
    cn_tensor *s = cn_index_select(x, 0, idx);
    const int64_t ss[] = {4, 4, 3};
    th_check_shape("index_select strided dim 0", s, ss, 3);
    th_check_values("index_select strided dim 0", s, want0, 48, 0);
    cn_release(s);
    /* along the middle dim of the transposed x, values 0..3 */
    const int64_t mh[] = {1, 3, 3, 0, 2};
    const int64_t ml[] = {5};
    cn_tensor *mi = i64_tensor(mh, ml, 1);
    double want[5 * 5 * 3];
    ref_index_select(xh, xs, 3, 1, mh, 5, want);
    cn_tensor *m = cn_index_select(x, 1, mi);
    const int64_t msh[] = {5, 5, 3};
    th_check_shape("index_select strided dim 1", m, msh, 3);
    th_check_values("index_select strided dim 1", m, want, 75, 0);

    /* large enough for the parallel path: 40000 rows of a dense matrix */
    const int64_t ls[] = {1000, 16};
    cn_tensor *big = cn_arange(0, 16000, 1, CN_F32, cn_cpu());
    cn_tensor *bigm = cn_reshape(big, ls, 2);
    int64_t *lih = malloc(sizeof(int64_t) * 40000);
    fill_index(lih, 40000, 1000);
    const int64_t ll[] = {40000};
    cn_tensor *li = i64_tensor(lih, ll, 1);
    cn_tensor *ls_out = cn_index_select(bigm, 0, li);
    double *lw = malloc(sizeof(double) * 40000 * 16);
    for (int64_t r = 0; r < 40000; r++)
        for (int64_t c = 0; c < 16; c++)
            lw[r * 16 + c] = (double)(lih[r] * 16 + c);
    th_check_values("index_select large", ls_out, lw, 40000 * 16, 0);
    free(lw);
    free(lih);
    cn_release(ls_out);
    cn_release(li);
    cn_release(bigm);
    cn_release(big);

    cn_release(m);
    cn_release(mi);
    cn_release(idx);
    cn_release(ibase);
    cn_release(x);
    cn_release(base);
}

/* ---- one_hot -------------------------------------------------------------------------------- */

static void test_one_hot_values_and_dtypes(void) {
    const int64_t ih[] = {0, 3, 1, 2, 2, 0};
    const int64_t is[] = {2, 3};
    cn_tensor *idx = i64_tensor(ih, is, 2);
    double want[24] = {0};
    for (int p = 0; p < 6; p++)
        want[p * 4 + ih[p]] = 1;
    const int64_t os[] = {2, 3, 4};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        cn_tensor *o = cn_one_hot(idx, 4, dts[k]);
        char what[64];
        snprintf(what, sizeof what, "one_hot %s", cn_dtype_name(dts[k]));
        th_check_shape(what, o, os, 3);
        CHECK(o && cn_dtype_of(o) == dts[k]);
        th_check_values(what, o, want, 24, 0);
        cn_release(o);
    }

    /* the raw bits of 1 in the half types */
    cn_tensor *h = cn_one_hot(idx, 4, CN_F16);
    uint16_t bits[24];
    CHECK(h && cn_read(h, bits, sizeof bits) == CN_OK);
    CHECK(bits[0] == 0x3C00 && bits[1] == 0 && bits[7] == 0x3C00);
    cn_release(h);
    cn_tensor *bf = cn_one_hot(idx, 4, CN_BF16);
    CHECK(bf && cn_read(bf, bits, sizeof bits) == CN_OK);
    CHECK(bits[0] == 0x3F80 && bits[1] == 0 && bits[7] == 0x3F80);
    cn_release(bf);

    /* i32 and u8 index dtypes */
    const double dv[] = {0, 3, 1, 2, 2, 0};
    cn_tensor *i32 = th_tensor(dv, is, 2, CN_I32);
    cn_tensor *a = cn_one_hot(i32, 4, CN_F32);
    th_check_values("one_hot from i32", a, want, 24, 0);
    cn_tensor *u8 = th_tensor(dv, is, 2, CN_U8);
    cn_tensor *b = cn_one_hot(u8, 4, CN_I64);
    th_check_values("one_hot from u8", b, want, 24, 0);

    /* a strided (transposed) index */
    cn_tensor *t = cn_transpose(idx, 0, 1); /* [3, 2]: t[i][j] = ih[j*3 + i] */
    double tw[24] = {0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            tw[(i * 2 + j) * 4 + ih[j * 3 + i]] = 1;
    cn_tensor *c = cn_one_hot(t, 4, CN_F32);
    const int64_t cs[] = {3, 2, 4};
    th_check_shape("one_hot strided", c, cs, 3);
    th_check_values("one_hot strided", c, tw, 24, 0);

    /* a 0-d index gives a vector */
    const int64_t two = 2;
    const int64_t none[] = {1};
    cn_tensor *sc = i64_tensor(&two, none, 0);
    cn_tensor *v = cn_one_hot(sc, 5, CN_F32);
    const int64_t vs[] = {5};
    const double vw[] = {0, 0, 1, 0, 0};
    th_check_shape("one_hot 0-d", v, vs, 1);
    th_check_values("one_hot 0-d", v, vw, 5, 0);

    cn_release(v);
    cn_release(sc);
    cn_release(c);
    cn_release(t);
    cn_release(b);
    cn_release(u8);
    cn_release(a);
    cn_release(i32);
    cn_release(idx);
}

/* ---- cat / stack ---------------------------------------------------------------------------- */

static void test_cat_2d_3d_every_dim(void) {
    /* 2-D along dim 0 with an empty piece in the middle */
    const double ah[] = {1, 2, 3, 4, 5, 6}, bh[] = {7, 8, 9};
    const int64_t as[] = {2, 3}, bs[] = {1, 3}, zs[] = {0, 3};
    cn_tensor *a = th_tensor(ah, as, 2, CN_F32), *b = th_tensor(bh, bs, 2, CN_F32);
    cn_tensor *z = cn_zeros(zs, 2, CN_F32, cn_cpu());
    cn_tensor *ts[] = {a, z, b};
    cn_tensor *c0 = cn_cat(ts, 3, 0);
    const int64_t c0s[] = {3, 3};
    const double c0w[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    th_check_shape("cat 2-D dim 0", c0, c0s, 2);
    th_check_values("cat 2-D dim 0", c0, c0w, 9, 0);

    /* 2-D along dim 1 (and -1) */
    const double dh[] = {10, 20};
    const int64_t ds[] = {2, 1};
    cn_tensor *d = th_tensor(dh, ds, 2, CN_F32);
    cn_tensor *ts1[] = {d, a, d};
    cn_tensor *c1 = cn_cat(ts1, 3, -1);
    const int64_t c1s[] = {2, 5};
    const double c1w[] = {10, 1, 2, 3, 10, 20, 4, 5, 6, 20};
    th_check_shape("cat 2-D dim 1", c1, c1s, 2);
    th_check_values("cat 2-D dim 1", c1, c1w, 10, 0);

    /* one tensor: a copy */
    cn_tensor *one = cn_cat(&a, 1, 0);
    th_check_values("cat of one", one, ah, 6, 0);

    /* 3-D along each dim, with pieces of different lengths there, one of them empty */
    for (int dim = 0; dim < 3; dim++) {
        int64_t shapes[3][CN_MAX_DIMS] = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
        shapes[0][dim] = 2;
        shapes[1][dim] = 0;
        shapes[2][dim] = 3;
        double h0[3 * 3 * 4], h1[1], h2[3 * 3 * 4];
        fill_values(h0, numel_of(shapes[0], 3));
        fill_values(h2, numel_of(shapes[2], 3));
        const double *hp[] = {h0, h1, h2};
        double want[8 * 3 * 4];
        int64_t ws[CN_MAX_DIMS];
        ref_cat(hp, (const int64_t(*)[CN_MAX_DIMS])shapes, 3, 3, dim, want, ws);
        cn_tensor *p0 = th_tensor(h0, shapes[0], 3, CN_F64);
        cn_tensor *p1 = cn_zeros(shapes[1], 3, CN_F64, cn_cpu());
        cn_tensor *p2 = th_tensor(h2, shapes[2], 3, CN_F64);
        cn_tensor *ps[] = {p0, p1, p2};
        cn_tensor *c = cn_cat(ps, 3, dim);
        char what[32];
        snprintf(what, sizeof what, "cat 3-D dim %d", dim);
        th_check_shape(what, c, ws, 3);
        th_check_values(what, c, want, numel_of(ws, 3), 0);
        cn_release(c);
        cn_release(p2);
        cn_release(p1);
        cn_release(p0);
    }

    cn_release(one);
    cn_release(c1);
    cn_release(d);
    cn_release(c0);
    cn_release(z);
    cn_release(b);
    cn_release(a);
}

static void test_cat_strided_and_int(void) {
    /* a transposed piece next to a dense one, in i64 */
    const double bh[] = {1, 2, 3, 4, 5, 6};
    const int64_t bs[] = {3, 2};
    cn_tensor *base = th_tensor(bh, bs, 2, CN_I64);
    cn_tensor *t = cn_transpose(base, 0, 1); /* [2, 3]: 1 3 5 / 2 4 6 */
    const double dh[] = {7, 8, 9, 10, 11, 12};
    const int64_t ds[] = {2, 3};
    cn_tensor *d = th_tensor(dh, ds, 2, CN_I64);
    cn_tensor *ts[] = {t, d};
    cn_tensor *c0 = cn_cat(ts, 2, 0);
    const double w0[] = {1, 3, 5, 2, 4, 6, 7, 8, 9, 10, 11, 12};
    CHECK(c0 && cn_dtype_of(c0) == CN_I64);
    th_check_values("cat strided dim 0", c0, w0, 12, 0);
    cn_tensor *c1 = cn_cat(ts, 2, 1);
    const double w1[] = {1, 3, 5, 7, 8, 9, 2, 4, 6, 10, 11, 12};
    th_check_values("cat strided dim 1", c1, w1, 12, 0);
    /* a slice with a step as a piece */
    cn_tensor *s = cn_slice(d, 1, 0, 3, 2); /* [2, 2]: 7 9 / 10 12 */
    cn_tensor *ts2[] = {s, t};
    cn_tensor *c2 = cn_cat(ts2, 2, 1);
    const double w2[] = {7, 9, 1, 3, 5, 10, 12, 2, 4, 6};
    th_check_values("cat slice piece", c2, w2, 10, 0);

    cn_release(c2);
    cn_release(s);
    cn_release(c1);
    cn_release(c0);
    cn_release(d);
    cn_release(t);
    cn_release(base);
}

static void test_stack_new_dim_positions(void) {
    double h[3][6];
    const int64_t s[] = {2, 3};
    cn_tensor *ts[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 6; i++)
            h[k][i] = 100 * k + i;
        ts[k] = th_tensor(h[k], s, 2, CN_F32);
    }
    /* stack at dim d: out[..k at d..] = ts[k][rest] */
    for (int dim = -3; dim <= 2; dim++) {
        int pos = dim < 0 ? dim + 3 : dim;
        int64_t os[3], c[3];
        for (int d = 0, j = 0; d < 3; d++)
            os[d] = d == pos ? 3 : s[j++];
        double want[18];
        for (int64_t p = 0; p < 18; p++) {
            unravel(p, os, 3, c);
            int64_t rest[2];
            for (int d = 0, j = 0; d < 3; d++)
                if (d != pos) rest[j++] = c[d];
            want[p] = h[c[pos]][rest[0] * 3 + rest[1]];
        }
        cn_tensor *st = cn_stack(ts, 3, dim);
        char what[32];
        snprintf(what, sizeof what, "stack dim %d", dim);
        th_check_shape(what, st, os, 3);
        th_check_values(what, st, want, 18, 0);
        cn_release(st);
    }
    /* stacking strided tensors */
    cn_tensor *tt[] = {cn_transpose(ts[0], 0, 1), cn_transpose(ts[1], 0, 1)};
    cn_tensor *st = cn_stack(tt, 2, 0);
    const double w[] = {0, 3, 1, 4, 2, 5, 100, 103, 101, 104, 102, 105};
    const int64_t ws[] = {2, 3, 2};
    th_check_shape("stack strided", st, ws, 3);
    th_check_values("stack strided", st, w, 12, 0);
    cn_release(st);
    cn_release(tt[1]);
    cn_release(tt[0]);
    for (int k = 0; k < 3; k++)
        cn_release(ts[k]);
}

/* ---- split / chunk -------------------------------------------------------------------------- */

/* Checks pieces[k] are the consecutive slices of x (host xh, shape xs) along dim with sizes. */
static void check_pieces(const char *what, cn_tensor **parts, int count, const double *xh,
                         const int64_t *xs, int ndim, int dim, const int64_t *sizes) {
    int64_t start = 0;
    for (int k = 0; k < count; k++) {
        int64_t ps[CN_MAX_DIMS], c[CN_MAX_DIMS];
        memcpy(ps, xs, sizeof(int64_t) * (size_t)ndim);
        ps[dim] = sizes[k];
        int64_t n = numel_of(ps, ndim);
        double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t p = 0; p < n; p++) {
            unravel(p, ps, ndim, c);
            c[dim] += start;
            want[p] = xh[ravel(c, xs, ndim)];
        }
        char w[64];
        snprintf(w, sizeof w, "%s piece %d", what, k);
        th_check_shape(w, parts[k], ps, ndim);
        th_check_values(w, parts[k], want, n, 0);
        free(want);
        start += sizes[k];
    }
}

static void test_split_last_piece_smaller(void) {
    double xh[35];
    for (int i = 0; i < 35; i++)
        xh[i] = i;
    const int64_t xs[] = {7, 5};
    cn_tensor *x = th_tensor(xh, xs, 2, CN_F32);
    cn_tensor *parts[8];

    int n = cn_split(x, 3, 0, parts, 8);
    CHECK(n == 3);
    const int64_t s0[] = {3, 3, 1};
    if (n == 3) check_pieces("split dim 0", parts, 3, xh, xs, 2, 0, s0);
    for (int k = 0; k < n && k < 8; k++)
        cn_release(parts[k]);

    n = cn_split(x, 2, -1, parts, 8);
    CHECK(n == 3);
    const int64_t s1[] = {2, 2, 1};
    if (n == 3) check_pieces("split dim 1", parts, 3, xh, xs, 2, 1, s1);
    for (int k = 0; k < n && k < 8; k++)
        cn_release(parts[k]);

    /* a size that divides evenly, and one larger than the dim */
    n = cn_split(x, 7, 0, parts, 8);
    CHECK(n == 1);
    const int64_t s2[] = {7};
    if (n == 1) check_pieces("split whole", parts, 1, xh, xs, 2, 0, s2);
    for (int k = 0; k < n && k < 8; k++)
        cn_release(parts[k]);
    n = cn_split(x, 100, 1, parts, 8);
    CHECK(n == 1);
    for (int k = 0; k < n && k < 8; k++)
        cn_release(parts[k]);

    /* max_parts below the count (ops.h: "writes at most max_parts references into parts and
     * returns the number of pieces"): the count comes back, only max_parts refs are written */
    parts[2] = NULL;
    n = cn_split(x, 1, 0, parts, 2);
    CHECK(n == 7);
    CHECK(parts[2] == NULL);
    const int64_t s3[] = {1, 1};
    if (n == 7) {
        check_pieces("split capped", parts, 2, xh, xs, 2, 0, s3);
        cn_release(parts[0]);
        cn_release(parts[1]);
    }
    cn_clear_error();

    /* pieces of a strided tensor */
    cn_tensor *t = cn_transpose(x, 0, 1); /* [5, 7] */
    double th[35];
    int64_t tsh[2];
    host_transpose(xh, xs, 2, 0, 1, th, tsh);
    n = cn_split(t, 4, 1, parts, 8);
    CHECK(n == 2);
    const int64_t s4[] = {4, 3};
    if (n == 2) check_pieces("split strided", parts, 2, th, tsh, 2, 1, s4);
    for (int k = 0; k < n && k < 8; k++)
        cn_release(parts[k]);

    /* errors: nothing is written */
    parts[0] = NULL;
    CHECK_FAILS_INT(cn_split(x, 0, 0, parts, 8), CN_ERR_INVALID_ARG, "split");
    CHECK_FAILS_INT(cn_split(x, -2, 0, parts, 8), CN_ERR_INVALID_ARG, "split");
    CHECK_FAILS_INT(cn_split(x, 2, 2, parts, 8), CN_ERR_INVALID_ARG, "split");
    CHECK(parts[0] == NULL);

    cn_release(t);
    cn_release(x);
}

static void test_chunk_torch_semantics(void) {
    double xh[60];
    for (int i = 0; i < 60; i++)
        xh[i] = i;
    cn_tensor *parts[16];
    /* (n, chunks) -> torch.chunk sizes: pieces of ceil(n / chunks), the last smaller, and
     * sometimes fewer pieces than asked for */
    struct {
        int64_t n;
        int chunks;
        int count;
        int64_t sizes[8];
    } cases[] = {
        {5, 3, 3, {2, 2, 1}},     {6, 4, 3, {2, 2, 2}},     {10, 3, 3, {4, 4, 2}},
        {2, 5, 2, {1, 1}},        {6, 3, 3, {2, 2, 2}},     {7, 1, 1, {7}},
        {10, 4, 4, {3, 3, 3, 1}}, {12, 5, 4, {3, 3, 3, 3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t xs[] = {3, cases[c].n};
        cn_tensor *x = th_tensor(xh, xs, 2, CN_F32);
        int n = cn_chunk(x, cases[c].chunks, 1, parts, 16);
        char what[64];
        snprintf(what, sizeof what, "chunk(n=%lld, chunks=%d)", (long long)cases[c].n,
                 cases[c].chunks);
        if (n != cases[c].count) {
            fprintf(stderr, "%s: %d pieces, want %d\n", what, n, cases[c].count);
            th_checks_failed++;
        } else {
            check_pieces(what, parts, n, xh, xs, 2, 1, cases[c].sizes);
        }
        for (int k = 0; k < n && k < 16; k++)
            cn_release(parts[k]);
        cn_release(x);
    }

    /* dim 0 of a 3-D tensor, negative dim */
    const int64_t ys[] = {5, 2, 3};
    cn_tensor *y = th_tensor(xh, ys, 3, CN_F64);
    int n = cn_chunk(y, 2, -3, parts, 16);
    CHECK(n == 2);
    const int64_t ysz[] = {3, 2};
    if (n == 2) check_pieces("chunk 3-D", parts, 2, xh, ys, 3, 0, ysz);
    for (int k = 0; k < n && k < 16; k++)
        cn_release(parts[k]);

    parts[0] = NULL;
    CHECK_FAILS_INT(cn_chunk(y, 0, 0, parts, 16), CN_ERR_INVALID_ARG, "chunk");
    CHECK_FAILS_INT(cn_chunk(y, -1, 0, parts, 16), CN_ERR_INVALID_ARG, "chunk");
    CHECK_FAILS_INT(cn_chunk(y, 2, 3, parts, 16), CN_ERR_INVALID_ARG, "chunk");
    CHECK(parts[0] == NULL);
    cn_release(y);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_index_errors(void) {
    double xh[12];
    fill_values(xh, 12);
    const int64_t xs[] = {3, 4};
    cn_tensor *x = th_tensor(xh, xs, 2, CN_F32);
    const int64_t is[] = {3, 2};

    /* gather: too big, negative, and on the other dim */
    const int64_t big[] = {0, 1, 2, 4, 0, 0};
    cn_tensor *ib = i64_tensor(big, is, 2);
    CHECK_FAILS(cn_gather(x, 1, ib), CN_ERR_INDEX, "gather");
    cn_clear_error();
    CHECK(cn_gather(x, 1, ib) == NULL);
    CHECK(strstr(cn_last_error(), "4") && strstr(cn_last_error(), "out of range"));
    cn_clear_error();
    CHECK_FAILS(cn_gather(x, 0, ib), CN_ERR_INDEX, "gather"); /* 4 >= 3 on dim 0 too */
    const int64_t negv[] = {0, 1, -1, 0, 0, 0};
    cn_tensor *in = i64_tensor(negv, is, 2);
    CHECK_FAILS(cn_gather(x, 1, in), CN_ERR_INDEX, "gather");
    /* a float index */
    const double fh[] = {0, 1, 2, 3, 0, 1};
    cn_tensor *fi = th_tensor(fh, is, 2, CN_F32);
    cn_clear_error();
    cn_tensor *r = cn_gather(x, 1, fi);
    CHECK(r == NULL);
    cn_release(r);
    CHECK(cn_last_status() == CN_ERR_DTYPE || cn_last_status() == CN_ERR_KIND);
    CHECK(strstr(cn_last_error(), "gather") != NULL);
    cn_clear_error();
    /* an index with a different number of dims, and dim out of range */
    const int64_t one[] = {0};
    const int64_t ones[] = {1};
    cn_tensor *i1 = i64_tensor(one, ones, 1);
    CHECK_FAILS(cn_gather(x, 1, i1), CN_ERR_SHAPE, "gather");
    const int64_t ok[] = {0, 1, 2, 3, 0, 0};
    cn_tensor *iok = i64_tensor(ok, is, 2);
    CHECK_FAILS(cn_gather(x, 2, iok), CN_ERR_INVALID_ARG, "gather");

    /* scatter_add: a bad index fails and leaves x as it was */
    const double sh[] = {1, 1, 1, 1, 1, 1};
    cn_tensor *src = th_tensor(sh, is, 2, CN_F32);
    CHECK_FAILS(cn_scatter_add(x, 1, ib, src), CN_ERR_INDEX, "scatter_add");
    CHECK_FAILS(cn_scatter_add(x, 1, in, src), CN_ERR_INDEX, "scatter_add");
    th_check_values("x after failed scatter_add", x, xh, 12, 0);

    /* index_select */
    const int64_t sel[] = {0, 3};
    const int64_t sl[] = {2};
    cn_tensor *si = i64_tensor(sel, sl, 1);
    CHECK_FAILS(cn_index_select(x, 0, si), CN_ERR_INDEX, "index_select");
    const int64_t seln[] = {-1};
    cn_tensor *sn = i64_tensor(seln, ones, 1);
    CHECK_FAILS(cn_index_select(x, 1, sn), CN_ERR_INDEX, "index_select");

    /* one_hot */
    CHECK_FAILS(cn_one_hot(iok, 3, CN_F32), CN_ERR_INDEX, "one_hot");
    CHECK_FAILS(cn_one_hot(in, 4, CN_F32), CN_ERR_INDEX, "one_hot");
    CHECK_FAILS(cn_one_hot(iok, -1, CN_F32), CN_ERR_INVALID_ARG, "one_hot");
    cn_clear_error();
    r = cn_one_hot(fi, 4, CN_F32);
    CHECK(r == NULL);
    cn_release(r);
    CHECK(cn_last_status() == CN_ERR_DTYPE || cn_last_status() == CN_ERR_KIND);
    CHECK(strstr(cn_last_error(), "one_hot") != NULL);
    cn_clear_error();

    cn_release(sn);
    cn_release(si);
    cn_release(src);
    cn_release(iok);
    cn_release(i1);
    cn_release(fi);
    cn_release(in);
    cn_release(ib);
    cn_release(x);
}

static void test_cat_stack_errors(void) {
    const int64_t as[] = {2, 3}, bs[] = {2, 4};
    cn_tensor *a = cn_zeros(as, 2, CN_F32, cn_cpu());
    cn_tensor *b = cn_zeros(bs, 2, CN_F32, cn_cpu());
    cn_tensor *ab[] = {a, b};
    CHECK_FAILS(cn_cat(ab, 2, 0), CN_ERR_SHAPE, "cat"); /* sizes differ off dim */
    cn_tensor *ok = cn_cat(ab, 2, 1);                   /* fine along dim 1 */
    const int64_t oks[] = {2, 7};
    th_check_shape("cat dim 1", ok, oks, 2);
    cn_release(ok);
    const int64_t cs[] = {2, 3, 1};
    cn_tensor *c = cn_zeros(cs, 3, CN_F32, cn_cpu());
    cn_tensor *ac[] = {a, c};
    CHECK_FAILS(cn_cat(ac, 2, 0), CN_ERR_SHAPE, "cat"); /* ndim differs */
    cn_tensor *d = cn_zeros(as, 2, CN_F64, cn_cpu());
    cn_tensor *ad[] = {a, d};
    CHECK_FAILS(cn_cat(ad, 2, 0), CN_ERR_DTYPE, "cat");
    cn_tensor *aa[] = {a, a};
    CHECK_FAILS(cn_cat(aa, 2, 2), CN_ERR_INVALID_ARG, "cat");

    CHECK_FAILS(cn_stack(ab, 2, 0), CN_ERR_SHAPE, "stack");
    CHECK_FAILS(cn_stack(ad, 2, 0), CN_ERR_DTYPE, "stack");
    CHECK_FAILS(cn_stack(aa, 2, 3), CN_ERR_INVALID_ARG, "stack");

    cn_release(d);
    cn_release(c);
    cn_release(b);
    cn_release(a);
}

int main(void) {
    RUN(test_gather_2d_both_dims);
    RUN(test_gather_3d_every_dim_and_dtype);
    RUN(test_gather_strided_inputs);
    RUN(test_gather_large);
    RUN(test_scatter_add_hand_computed);
    RUN(test_scatter_add_3d_dtypes_and_strides);
    RUN(test_scatter_add_large_histogram);
    RUN(test_index_select_dims_dtypes);
    RUN(test_index_select_strided);
    RUN(test_one_hot_values_and_dtypes);
    RUN(test_cat_2d_3d_every_dim);
    RUN(test_cat_strided_and_int);
    RUN(test_stack_new_dim_positions);
    RUN(test_split_last_piece_smaller);
    RUN(test_chunk_torch_semantics);
    RUN(test_index_errors);
    RUN(test_cat_stack_errors);
    return th_finish();
}
