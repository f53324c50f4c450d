/* Views: reshape, transpose, permute, slice, expand, squeeze/unsqueeze, contiguous, and chains of
 * them. The oracle is index arithmetic on the original host array, done here in the test; the
 * errors check status codes and that the message names the op. */
#include "harness.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* base[i] = i, shaped as `shape`, in f64. */
static cn_tensor *arange_tensor(const int64_t *shape, int ndim, double *host, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        host[i] = (double)i;
    return th_tensor(host, shape, ndim, CN_F64);
}

/* ---- reshape ------------------------------------------------------------------------------- */

static void test_reshape_contiguous_keeps_row_major_order(void) {
    double h[24];
    const int64_t s[] = {2, 3, 4};
    cn_tensor *x = arange_tensor(s, 3, h, 24);

    const int64_t s2[] = {4, -1};
    cn_tensor *r = cn_reshape(x, s2, 2);
    const int64_t want2[] = {4, 6};
    th_check_shape("reshape [4,-1]", r, want2, 2);
    th_check_values("reshape [4,-1]", r, h, 24, 0);
    CHECK(cn_is_contiguous(r));

    const int64_t s3[] = {-1};
    cn_tensor *flat = cn_reshape(r, s3, 1);
    const int64_t want3[] = {24};
    th_check_shape("reshape [-1]", flat, want3, 1);
    /* cn_read of the flat view equals the original order byte for byte */
    double got[24];
    CHECK(flat && cn_read(flat, got, sizeof got) == CN_OK);
    CHECK(memcmp(got, h, sizeof got) == 0);

    const int64_t s4[] = {1, 2, 1, 12};
    cn_tensor *r4 = cn_reshape(flat, s4, 4);
    th_check_shape("reshape [1,2,1,12]", r4, s4, 4);
    th_check_values("reshape [1,2,1,12]", r4, h, 24, 0);

    /* to a 0-d tensor and back */
    double one = 7;
    const int64_t s1[] = {1};
    cn_tensor *o = th_tensor(&one, s1, 1, CN_F64);
    cn_tensor *sc = cn_reshape(o, s1, 0);
    CHECK(sc && cn_ndim(sc) == 0 && cn_numel(sc) == 1);
    th_check_values("reshape to 0-d", sc, &one, 1, 0);

    cn_release(sc);
    cn_release(o);
    cn_release(r4);
    cn_release(flat);
    cn_release(r);
    cn_release(x);
}

static void test_reshape_non_contiguous_copies_in_logical_order(void) {
    double h[6];
    const int64_t s[] = {2, 3};
    cn_tensor *x = arange_tensor(s, 2, h, 6);
    cn_tensor *t = cn_transpose(x, 0, 1); /* [3, 2]: t[i][j] = h[j*3 + i] */
    CHECK(t && !cn_is_contiguous(t));
    const int64_t s2[] = {6};
    cn_tensor *r = cn_reshape(t, s2, 1);
    double want[6];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            want[i * 2 + j] = h[j * 3 + i];
    th_check_shape("reshape of transpose", r, s2, 1);
    th_check_values("reshape of transpose", r, want, 6, 0);
    CHECK(cn_is_contiguous(r));

    /* a reshape that only splits a dim of a strided view: values in logical order either way */
    const int64_t s3[] = {3, 2, 1};
    cn_tensor *r3 = cn_reshape(t, s3, 3);
    th_check_values("reshape [3,2,1] of transpose", r3, want, 6, 0);

    cn_release(r3);
    cn_release(r);
    cn_release(t);
    cn_release(x);
}

/* ---- transpose and permute ------------------------------------------------------------------ */

static void test_transpose_swaps_index_roles(void) {
    double h[24];
    const int64_t s[] = {2, 3, 4};
    cn_tensor *x = arange_tensor(s, 3, h, 24);

    cn_tensor *t = cn_transpose(x, 0, 2); /* [4, 3, 2]: t[i][j][k] = x[k][j][i] */
    const int64_t ts[] = {4, 3, 2};
    th_check_shape("transpose(0,2)", t, ts, 3);
    double want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                want[(i * 3 + j) * 2 + k] = h[(k * 3 + j) * 4 + i];
    th_check_values("transpose(0,2)", t, want, 24, 0);
    CHECK(t && cn_strides(t)[0] == 1 && cn_strides(t)[2] == 12);

    cn_tensor *u = cn_transpose(x, -1, -2); /* [2, 4, 3]: u[a][b][c] = x[a][c][b] */
    const int64_t us[] = {2, 4, 3};
    th_check_shape("transpose(-1,-2)", u, us, 3);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 3; c++)
                want[(a * 4 + b) * 3 + c] = h[(a * 3 + c) * 4 + b];
    th_check_values("transpose(-1,-2)", u, want, 24, 0);

    /* transposing back restores the original, and a dim with itself is the identity */
    cn_tensor *back = cn_transpose(u, 1, 2);
    th_check_shape("transpose back", back, s, 3);
    th_check_values("transpose back", back, h, 24, 0);
    cn_tensor *same = cn_transpose(x, 1, 1);
    th_check_values("transpose(1,1)", same, h, 24, 0);

    cn_release(same);
    cn_release(back);
    cn_release(u);
    cn_release(t);
    cn_release(x);
}

static void test_permute_reorders_dims(void) {
    double h[120];
    const int64_t s[] = {2, 3, 4, 5};
    cn_tensor *x = arange_tensor(s, 4, h, 120);
    const int perm[] = {2, 0, 3, 1}; /* out dim d is input dim perm[d]: [4, 2, 5, 3] */
    cn_tensor *p = cn_permute(x, perm);
    const int64_t ps[] = {4, 2, 5, 3};
    th_check_shape("permute", p, ps, 4);
    double want[120];
    int64_t n = 0;
    for (int a = 0; a < 4; a++)             /* input dim 2 */
        for (int b = 0; b < 2; b++)         /* input dim 0 */
            for (int c = 0; c < 5; c++)     /* input dim 3 */
                for (int d = 0; d < 3; d++) /* input dim 1 */
                    want[n++] = h[((b * 3 + d) * 4 + a) * 5 + c];
    th_check_values("permute", p, want, 120, 0);
    CHECK(p && !cn_is_contiguous(p));

    const int id[] = {0, 1, 2, 3};
    cn_tensor *q = cn_permute(x, id);
    th_check_values("identity permute", q, h, 120, 0);

    cn_release(q);
    cn_release(p);
    cn_release(x);
}

/* ---- slice ---------------------------------------------------------------------------------- */

/* Python's range(start, end, step) after clamping into [0, n], for step > 0. */
static int64_t py_slice(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *out) {
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0) start = 0;
    if (start > n) start = n;
    if (end < 0) end = 0;
    if (end > n) end = n;
    int64_t k = 0;
    for (int64_t i = start; i < end; i += step)
        out[k++] = i;
    return k;
}

static void test_slice_python_semantics(void) {
    double h[10];
    const int64_t s[] = {10};
    cn_tensor *x = arange_tensor(s, 1, h, 10);
    const int64_t cases[][3] = {
        {2, 9, 3},   {-4, -1, 1}, {-100, 100, 4}, {0, 10, 1},    {7, 3, 1},    {5, 5, 1},
        {-3, 10, 2}, {9, 100, 5}, {12, 20, 1},    {-20, -15, 1}, {0, -1, 100}, {3, 4, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t idx[10];
        int64_t k = py_slice(10, cases[c][0], cases[c][1], cases[c][2], idx);
        double want[10];
        for (int64_t i = 0; i < k; i++)
            want[i] = h[idx[i]];
        cn_tensor *v = cn_slice(x, 0, cases[c][0], cases[c][1], cases[c][2]);
        char what[64];
        snprintf(what, sizeof what, "slice(%lld, %lld, %lld)", (long long)cases[c][0],
                 (long long)cases[c][1], (long long)cases[c][2]);
        th_check_shape(what, v, &k, 1);
        th_check_values(what, v, want, k, 0);
        cn_release(v);
    }
    cn_release(x);
}

/* The gradient of a slice whose step is past the end (it keeps one element): the backward
 * rebuilt the slice's end as start + step * len, which passed int64 (found by fuzz_ops). */
static void test_slice_huge_step_gradient(void) {
    double h[10];
    const int64_t s[] = {10};
    cn_tensor *x = cn_require_grad(th_own(cn_to_device(th_own(arange_tensor(s, 1, h, 10)),
                                                       cn_autodiff(cn_cpu()))));
    cn_tensor *v = th_own(cn_slice(x, 0, 3, INT64_MAX, INT64_MAX)); /* x[3] alone */
    const int64_t one = 1;
    th_check_shape("slice(3, max, max)", v, &one, 1);
    cn_grads *g = cn_backward(th_own(cn_sum(th_own(cn_mul_scalar(v, 2.0)))));
    CHECK(g != NULL);
    if (g) {
        const double want[10] = {0, 0, 0, 2, 0, 0, 0, 0, 0, 0}; /* d(2 x[3]) / dx */
        th_check_values("slice(3, max, max) grad", cn_grad(g, x), want, 10, 0);
        cn_grads_free(g);
    }
    th_release_owned();
}

static void test_slice_inner_dim_of_matrix(void) {
    double h[4 * 7];
    const int64_t s[] = {4, 7};
    cn_tensor *x = arange_tensor(s, 2, h, 28);
    cn_tensor *v = cn_slice(x, -1, 1, -1, 2); /* columns 1, 3, 5 */
    const int64_t vs[] = {4, 3};
    th_check_shape("slice cols", v, vs, 2);
    double want[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = h[i * 7 + 1 + 2 * j];
    th_check_values("slice cols", v, want, 12, 0);
    CHECK(v && cn_strides(v)[1] == 2 && cn_strides(v)[0] == 7);

    cn_tensor *w = cn_slice(v, 0, 1, 3, 1); /* rows 1, 2 of that */
    const int64_t ws[] = {2, 3};
    th_check_shape("slice of slice", w, ws, 2);
    th_check_values("slice of slice", w, want + 3, 6, 0);

    cn_release(w);
    cn_release(v);
    cn_release(x);
}

/* ---- expand --------------------------------------------------------------------------------- */

static void test_expand_repeats_with_stride_zero(void) {
    double h[3] = {10, 20, 30};
    const int64_t s[] = {3, 1};
    cn_tensor *x = th_tensor(h, s, 2, CN_F64);
    const int64_t es[] = {2, 3, 4};
    cn_tensor *e = cn_expand(x, es, 3);
    th_check_shape("expand", e, es, 3);
    double want[24];
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                want[(a * 3 + i) * 4 + j] = h[i];
    th_check_values("expand", e, want, 24, 0);
    CHECK(e && cn_strides(e)[0] == 0 && cn_strides(e)[2] == 0);
    CHECK(e && cn_numel(e) == 24);

    /* a 1-D row broadcast up to a matrix, and an expand to the same shape */
    const int64_t rs[] = {3};
    cn_tensor *row = th_tensor(h, rs, 1, CN_F64);
    const int64_t ms[] = {2, 3};
    cn_tensor *m = cn_expand(row, ms, 2);
    const double mw[] = {10, 20, 30, 10, 20, 30};
    th_check_values("expand row", m, mw, 6, 0);
    cn_tensor *same = cn_expand(row, rs, 1);
    th_check_values("expand same", same, h, 3, 0);

    /* materialising an expanded tensor gives the repeated values densely */
    cn_tensor *c = cn_contiguous(e);
    CHECK(c && cn_is_contiguous(c));
    th_check_values("contiguous(expand)", c, want, 24, 0);

    cn_release(c);
    cn_release(same);
    cn_release(m);
    cn_release(row);
    cn_release(e);
    cn_release(x);
}

/* ---- squeeze / unsqueeze -------------------------------------------------------------------- */

static void test_squeeze_unsqueeze(void) {
    double h[6];
    const int64_t s[] = {2, 1, 3};
    cn_tensor *x = arange_tensor(s, 3, h, 6);

    cn_tensor *a = cn_squeeze(x, 1);
    const int64_t as[] = {2, 3};
    th_check_shape("squeeze(1)", a, as, 2);
    th_check_values("squeeze(1)", a, h, 6, 0);
    cn_tensor *b = cn_squeeze(x, -2);
    th_check_shape("squeeze(-2)", b, as, 2);

    cn_tensor *c = cn_unsqueeze(x, 0);
    const int64_t cs[] = {1, 2, 1, 3};
    th_check_shape("unsqueeze(0)", c, cs, 4);
    th_check_values("unsqueeze(0)", c, h, 6, 0);
    cn_tensor *d = cn_unsqueeze(x, -1); /* -1 inserts at the end */
    const int64_t ds[] = {2, 1, 3, 1};
    th_check_shape("unsqueeze(-1)", d, ds, 4);
    cn_tensor *e = cn_unsqueeze(x, 3);
    th_check_shape("unsqueeze(3)", e, ds, 4);
    cn_tensor *f = cn_unsqueeze(a, -2); /* [2, 3] -> [2, 1, 3] */
    th_check_shape("unsqueeze(-2)", f, s, 3);
    th_check_values("unsqueeze(-2)", f, h, 6, 0);

    /* a 0-d tensor unsqueezes to [1] and back */
    double v = 5;
    const int64_t none[] = {1};
    cn_tensor *sc = th_tensor(&v, none, 0, CN_F64);
    cn_tensor *u = cn_unsqueeze(sc, 0);
    const int64_t us[] = {1};
    th_check_shape("unsqueeze 0-d", u, us, 1);
    cn_tensor *sq = cn_squeeze(u, 0);
    CHECK(sq && cn_ndim(sq) == 0);
    th_check_values("squeeze to 0-d", sq, &v, 1, 0);

    cn_release(sq);
    cn_release(u);
    cn_release(sc);
    cn_release(f);
    cn_release(e);
    cn_release(d);
    cn_release(c);
    cn_release(b);
    cn_release(a);
    cn_release(x);
}

/* ---- contiguous ----------------------------------------------------------------------------- */

static void test_contiguous_of_permuted_is_row_major(void) {
    double h[24];
    const int64_t s[] = {2, 3, 4};
    cn_tensor *x = arange_tensor(s, 3, h, 24);
    const int perm[] = {1, 2, 0}; /* [3, 4, 2]: p[i][j][k] = x[k][i][j] */
    cn_tensor *p = cn_permute(x, perm);
    cn_tensor *c = cn_contiguous(p);
    const int64_t cs[] = {3, 4, 2};
    th_check_shape("contiguous", c, cs, 3);
    CHECK(c && cn_is_contiguous(c));
    CHECK(c && cn_strides(c)[0] == 8 && cn_strides(c)[1] == 2 && cn_strides(c)[2] == 1);
    double want[24];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 2; k++)
                want[(i * 4 + j) * 2 + k] = h[(k * 3 + i) * 4 + j];
    th_check_values("contiguous", c, want, 24, 0);
    /* the raw read of the dense copy is that order too */
    double raw[24];
    CHECK(c && cn_read(c, raw, sizeof raw) == CN_OK);
    CHECK(memcmp(raw, want, sizeof raw) == 0);

    /* contiguous of a dense tensor shares its data (a new header, no copy) */
    cn_tensor *same = cn_contiguous(x);
    CHECK(same && same != x && cn_is_contiguous(same));
    int64_t live = cn_live_bytes();
    cn_tensor *again = cn_contiguous(x);
    CHECK(cn_live_bytes() == live); /* no new storage */
    cn_release(again);
    cn_release(same);

    /* works for other dtypes: i32 and a 1-byte dtype */
    cn_tensor *xi = cn_cast(x, CN_I32);
    cn_tensor *pi = cn_permute(xi, perm);
    cn_tensor *ci = cn_contiguous(pi);
    CHECK(ci && cn_dtype_of(ci) == CN_I32);
    th_check_values("contiguous i32", ci, want, 24, 0);
    cn_tensor *xu = cn_cast(x, CN_U8);
    cn_tensor *pu = cn_permute(xu, perm);
    cn_tensor *cu = cn_contiguous(pu);
    th_check_values("contiguous u8", cu, want, 24, 0);

    cn_release(cu);
    cn_release(pu);
    cn_release(xu);
    cn_release(ci);
    cn_release(pi);
    cn_release(xi);
    cn_release(c);
    cn_release(p);
    cn_release(x);
}

/* ---- chains --------------------------------------------------------------------------------- */

static void test_chained_views_read_correctly(void) {
    double h[24];
    const int64_t s[] = {24};
    cn_tensor *base = arange_tensor(s, 1, h, 24);
    const int64_t rs[] = {4, 6};
    cn_tensor *r = cn_reshape(base, rs, 2);      /* r[a][b] = h[a*6 + b] */
    cn_tensor *t = cn_transpose(r, 0, 1);        /* [6, 4]: t[b][a] = r[a][b] */
    cn_tensor *sl = cn_slice(t, 0, 1, 6, 2);     /* [3, 4]: rows b = 1, 3, 5 */
    cn_tensor *s2 = cn_slice(sl, 1, -3, 100, 2); /* [3, 2]: cols a = 1, 3 */
    const int64_t want_s[] = {3, 2};
    th_check_shape("chain", s2, want_s, 2);
    double want[6];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            want[i * 2 + j] = h[(1 + 2 * j) * 6 + (1 + 2 * i)];
    th_check_values("chain", s2, want, 6, 0);

    /* further: unsqueeze, expand along the new dim, then reshape (which must copy) */
    cn_tensor *u = cn_unsqueeze(s2, 1); /* [3, 1, 2] */
    const int64_t es[] = {3, 2, 2};
    cn_tensor *e = cn_expand(u, es, 3);
    double want_e[12];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 2; j++)
                want_e[(i * 2 + k) * 2 + j] = want[i * 2 + j];
    th_check_values("chain expand", e, want_e, 12, 0);
    const int64_t fs[] = {-1};
    cn_tensor *flat = cn_reshape(e, fs, 1);
    const int64_t want_fs[] = {12};
    th_check_shape("chain flat", flat, want_fs, 1);
    th_check_values("chain flat", flat, want_e, 12, 0);

    /* a permute of a slice of a reshape in 3-D */
    const int64_t s3[] = {2, 3, 4};
    cn_tensor *r3 = cn_reshape(base, s3, 3);
    cn_tensor *q = cn_slice(r3, 2, 1, 4, 2); /* [2, 3, 2]: k = 1, 3 */
    const int perm[] = {2, 0, 1};            /* [2, 2, 3]: p[k][a][b] = q[a][b][k] */
    cn_tensor *p = cn_permute(q, perm);
    double want_p[12];
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                want_p[(k * 2 + a) * 3 + b] = h[(a * 3 + b) * 4 + 1 + 2 * k];
    th_check_values("permute(slice(reshape))", p, want_p, 12, 0);

    cn_release(p);
    cn_release(q);
    cn_release(r3);
    cn_release(flat);
    cn_release(e);
    cn_release(u);
    cn_release(s2);
    cn_release(sl);
    cn_release(t);
    cn_release(r);
    cn_release(base);
}

/* Views of a source that is released first stay valid (they hold the storage). */
static void test_view_outlives_source(void) {
    double h[6];
    const int64_t s[] = {2, 3};
    cn_tensor *x = arange_tensor(s, 2, h, 6);
    cn_tensor *t = cn_transpose(x, 0, 1);
    cn_release(x);
    const double want[] = {0, 3, 1, 4, 2, 5};
    th_check_values("view after source release", t, want, 6, 0);
    cn_release(t);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_view_errors(void) {
    double h[24];
    const int64_t s[] = {2, 3, 4};
    cn_tensor *x = arange_tensor(s, 3, h, 24);

    const int64_t bad_numel[] = {5, 5};
    CHECK_FAILS(cn_reshape(x, bad_numel, 2), CN_ERR_SHAPE, "reshape");
    const int64_t bad_infer[] = {5, -1}; /* 24 is not a multiple of 5 */
    CHECK_FAILS(cn_reshape(x, bad_infer, 2), CN_ERR_SHAPE, "reshape");
    const int64_t two_infer[] = {-1, 4, -1};
    CHECK_FAILS(cn_reshape(x, two_infer, 3), CN_ERR_INVALID_ARG, "reshape");
    const int64_t neg[] = {-2, -12};
    CHECK_FAILS(cn_reshape(x, neg, 2), CN_ERR_INVALID_ARG, "reshape");

    CHECK_FAILS(cn_transpose(x, 0, 3), CN_ERR_INVALID_ARG, "transpose");
    CHECK_FAILS(cn_transpose(x, -4, 0), CN_ERR_INVALID_ARG, "transpose");

    const int dup[] = {0, 0, 1};
    CHECK_FAILS(cn_permute(x, dup), CN_ERR_INVALID_ARG, "permute");
    const int oob[] = {0, 1, 3};
    CHECK_FAILS(cn_permute(x, oob), CN_ERR_INVALID_ARG, "permute");

    CHECK_FAILS(cn_slice(x, 0, 0, 2, 0), CN_ERR_INVALID_ARG, "slice");
    CHECK_FAILS(cn_slice(x, 0, 0, 2, -1), CN_ERR_INVALID_ARG, "slice");
    CHECK_FAILS(cn_slice(x, 3, 0, 2, 1), CN_ERR_INVALID_ARG, "slice");

    const int64_t grow[] = {2, 5, 4}; /* dim 1 has size 3, not 1 */
    CHECK_FAILS(cn_expand(x, grow, 3), CN_ERR_SHAPE, "expand");
    const int64_t fewer[] = {3, 4}; /* cannot drop dims */
    CHECK_FAILS(cn_expand(x, fewer, 2), CN_ERR_SHAPE, "expand");

    CHECK_FAILS(cn_squeeze(x, 1), CN_ERR_SHAPE, "squeeze"); /* dim 1 has size 3, not 1 */
    CHECK_FAILS(cn_squeeze(x, 3), CN_ERR_INVALID_ARG, "squeeze");
    CHECK_FAILS(cn_unsqueeze(x, 4), CN_ERR_INVALID_ARG, "unsqueeze");
    CHECK_FAILS(cn_unsqueeze(x, -5), CN_ERR_INVALID_ARG, "unsqueeze");

    /* a NULL input keeps the earlier error instead of replacing it */
    cn_clear_error();
    CHECK(cn_transpose(x, 0, 9) == NULL);
    cn_status first = cn_last_status();
    CHECK(cn_reshape(NULL, s, 3) == NULL);
    CHECK(cn_last_status() == first);
    cn_clear_error();

    cn_release(x);
}

static void test_absurd_shapes_overflow(void) {
    const int64_t big2[] = {1LL << 40, 1LL << 40};
    CHECK_FAILS(cn_zeros(big2, 2, CN_F32, cn_cpu()), CN_ERR_OVERFLOW, "zeros");
    const int64_t big3[] = {1LL << 31, 1LL << 31, 1LL << 31};
    CHECK_FAILS(cn_zeros(big3, 3, CN_F32, cn_cpu()), CN_ERR_OVERFLOW, "zeros");
    CHECK_FAILS(cn_empty(big3, 3, CN_U8, cn_cpu()), CN_ERR_OVERFLOW, "empty");
    CHECK_FAILS(cn_full(big2, 2, 1.0, CN_F64, cn_cpu()), CN_ERR_OVERFLOW, "full");
    /* 2^62 elements fit in int64, but not their bytes */
    const int64_t bytes[] = {1LL << 31, 1LL << 31};
    CHECK_FAILS(cn_zeros(bytes, 2, CN_F64, cn_cpu()), CN_ERR_OVERFLOW, "zeros");
    const int64_t max2[] = {INT64_MAX, 2};
    CHECK_FAILS(cn_empty(max2, 2, CN_U8, cn_cpu()), CN_ERR_OVERFLOW, "empty");

    /* an expand or reshape to such a shape fails the same way (no wrapped numel) */
    double one = 1;
    const int64_t s11[] = {1, 1};
    cn_tensor *x = th_tensor(&one, s11, 2, CN_F64);
    CHECK_FAILS(cn_expand(x, big2, 2), CN_ERR_OVERFLOW, "expand");
    const int64_t big_reshape[] = {1LL << 40, 1LL << 40, 0};
    /* a zero size makes the product 0, so no overflow: just 0 elements where x has 1 */
    CHECK_FAILS(cn_reshape(x, big_reshape, 3), CN_ERR_SHAPE, "reshape");
    cn_release(x);
}

/* A zero anywhere makes the product 0, whatever the other sizes: not an overflow, in any order of
 * the dims. (Runs last: an unchecked left-to-right product would trip UBSan and end the run.) */
static void test_zero_size_with_huge_dims(void) {
    const int64_t zero_last[] = {1LL << 40, 1LL << 40, 0};
    cn_tensor *z1 = cn_zeros(zero_last, 3, CN_F32, cn_cpu());
    CHECK(z1 && cn_numel(z1) == 0);
    cn_release(z1);
    const int64_t zero_first[] = {0, 1LL << 40, 1LL << 40};
    cn_tensor *z2 = cn_zeros(zero_first, 3, CN_F32, cn_cpu());
    CHECK(z2 && cn_numel(z2) == 0);
    cn_release(z2);
    cn_clear_error();
}

static void test_negative_sizes_rejected(void) {
    const int64_t neg[] = {2, -3};
    CHECK_FAILS(cn_zeros(neg, 2, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "zeros");
    CHECK_FAILS(cn_empty(neg, 2, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "empty");
    const int64_t neg1[] = {-1};
    CHECK_FAILS(cn_ones(neg1, 1, CN_I64, cn_cpu()), CN_ERR_INVALID_ARG, "ones");
    double v[1] = {0};
    CHECK_FAILS(cn_from_data(v, neg, 2, CN_F64, cn_cpu()), CN_ERR_INVALID_ARG, "from_data");

    double h[6];
    const int64_t s[] = {2, 3};
    cn_tensor *x = arange_tensor(s, 2, h, 6);
    const int64_t eneg[] = {-2, 3};
    CHECK_FAILS(cn_expand(x, eneg, 2), CN_ERR_INVALID_ARG, "expand");
    cn_release(x);
}

/* Views over an empty dim stay empty and readable. */
static void test_empty_views(void) {
    const int64_t s[] = {3, 0, 2};
    cn_tensor *x = cn_zeros(s, 3, CN_F32, cn_cpu());
    CHECK(x && cn_numel(x) == 0);
    cn_tensor *t = cn_transpose(x, 0, 2);
    const int64_t ts[] = {2, 0, 3};
    th_check_shape("transpose empty", t, ts, 3);
    const int64_t rs[] = {0, 7};
    cn_tensor *r = cn_reshape(t, rs, 2);
    th_check_shape("reshape empty", r, rs, 2);
    cn_tensor *c = cn_contiguous(t);
    CHECK(c && cn_numel(c) == 0);
    float dummy;
    CHECK(c && cn_read(c, &dummy, 0) == CN_OK);
    cn_release(c);
    cn_release(r);
    cn_release(t);
    cn_release(x);
}

int main(void) {
    RUN(test_reshape_contiguous_keeps_row_major_order);
    RUN(test_reshape_non_contiguous_copies_in_logical_order);
    RUN(test_transpose_swaps_index_roles);
    RUN(test_permute_reorders_dims);
    RUN(test_slice_python_semantics);
    RUN(test_slice_huge_step_gradient);
    RUN(test_slice_inner_dim_of_matrix);
    RUN(test_expand_repeats_with_stride_zero);
    RUN(test_squeeze_unsqueeze);
    RUN(test_contiguous_of_permuted_is_row_major);
    RUN(test_chained_views_read_correctly);
    RUN(test_view_outlives_source);
    RUN(test_view_errors);
    RUN(test_absurd_shapes_overflow);
    RUN(test_negative_sizes_rejected);
    RUN(test_empty_views);
    RUN(test_zero_size_with_huge_dims);
    return th_finish();
}
