/* The scans and sorts beyond the op table's cases (tests/test_op_table.c checks their values
 * against PyTorch and their gradients by finite differences): cumprod's gradient by hand where x
 * holds zeros, NaN and ties as PyTorch places them, the two-output calls (cummax, sort, topk,
 * max / min with indices), any / all at their edges, strided and long (threaded) inputs against
 * a plain loop here, and the errors of bad arguments.
 *
 * Expected values written out below are PyTorch 2.x's (torch.cumprod's autograd, torch.sort with
 * stable=True, torch.cummax, torch.topk, torch.max(x, dim), torch.any / torch.all), or computed
 * by hand where the comment says so. */
#include <stdint.h>

#include "harness.h"

static cn_tensor *vec(const double *v, int64_t n, cn_dtype dt) { return th_tensor(v, &n, 1, dt); }

/* ---- cumprod's gradient with zeros ------------------------------------------------------------ */

/* dL/dx for L = sum(g * cumprod(x)) on the autodiff device. */
static void check_cumprod_grad(const double *x, const double *g, const double *want, int64_t n,
                               const char *what) {
    cn_scope_begin();
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *xt = cn_require_grad(cn_from_data(x, &n, 1, CN_F64, ad));
    cn_tensor *gt = cn_from_data(g, &n, 1, CN_F64, ad);
    cn_grads *gr = cn_backward(cn_sum(cn_mul(cn_cumprod(xt, 0), gt)));
    CHECK(gr != NULL);
    th_check_values(what, gr ? cn_grad(gr, xt) : NULL, want, n, 1e-12);
    cn_grads_free(gr);
    cn_scope_end();
}

static void test_cumprod_gradient_with_zeros(void) {
    /* by hand: dL/dx_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k */
    const double x0[4] = {2, 3, 0, 5}, g0[4] = {1, 1, 1, 1};
    const double w0[4] = {1 + 3 + 0 + 0, 2 + 0 + 0, 2 * 3 + 2 * 3 * 5, 0};
    check_cumprod_grad(x0, g0, w0, 4, "one zero");
    /* two zeros: torch gives [1, 22, 0, 0, 0] */
    const double x1[5] = {2, 0, 3, 0, 4}, g1[5] = {1, 2, 3, 4, 5}, w1[5] = {1, 22, 0, 0, 0};
    check_cumprod_grad(x1, g1, w1, 5, "two zeros");
    /* no zero: y / x agrees */
    const double x2[3] = {0.5, -2, 4}, g2[3] = {1, -1, 2};
    const double w2[3] = {1 - (-2) + 2 * (-2 * 4), -0.5 + 2 * 0.5 * 4, 2 * 0.5 * -2};
    check_cumprod_grad(x2, g2, w2, 3, "no zero");
    /* a leading zero: only its own slot sees the others */
    const double x3[3] = {0, 2, 3}, g3[3] = {1, 1, 1}, w3[3] = {1 + 2 + 6, 0, 0};
    check_cumprod_grad(x3, g3, w3, 3, "leading zero");
}

static void test_cumsum_gradient_is_the_reverse_cumsum(void) {
    cn_scope_begin();
    const double x[4] = {1, 2, 3, 4}, g[4] = {1, 10, 100, 1000};
    int64_t n = 4;
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *xt = cn_require_grad(cn_from_data(x, &n, 1, CN_F64, ad));
    cn_grads *gr = cn_backward(cn_sum(cn_mul(cn_cumsum(xt, -1), cn_from_data(g, &n, 1, CN_F64,
                                                                               ad))));
    const double want[4] = {1111, 1110, 1100, 1000};
    th_check_values("cumsum grad", gr ? cn_grad(gr, xt) : NULL, want, 4, 0);
    cn_grads_free(gr);
    cn_scope_end();
}

/* ---- NaN, ties, two outputs --------------------------------------------------------------------- */

static void test_sort_places_nan_last_and_keeps_ties_in_order(void) {
    cn_scope_begin();
    const double x[6] = {2, NAN, 1, 2, NAN, 0};
    for (int k = 0; k < 2; k++) {
        cn_dtype dt = k ? CN_F32 : CN_F64;
        cn_tensor *t = vec(x, 6, dt), *idx = NULL;
        /* torch.sort(x, stable=True) and descending=True */
        const double va[6] = {0, 1, 2, 2, NAN, NAN}, ia[6] = {5, 2, 0, 3, 1, 4};
        const double vd[6] = {NAN, NAN, 2, 2, 1, 0}, id[6] = {1, 4, 0, 3, 2, 5};
        th_check_values("sort ascending", cn_sort(t, 0, 0, &idx), va, 6, 0);
        th_check_values("sort ascending indices", idx, ia, 6, 0);
        CHECK(idx && cn_dtype_of(idx) == CN_I64);
        th_check_values("sort descending", cn_sort(t, -1, 1, &idx), vd, 6, 0);
        th_check_values("sort descending indices", idx, id, 6, 0);
        th_check_values("argsort", cn_argsort(t, 0, 1), id, 6, 0);
    }
    /* ints, and no indices wanted */
    const double xi[5] = {3, -1, 3, 0, -1}, vi[5] = {-1, -1, 0, 3, 3};
    th_check_values("sort i32", cn_sort(vec(xi, 5, CN_I32), 0, 0, NULL), vi, 5, 0);
    cn_scope_end();
}

static void test_cummax_takes_the_last_tie_and_nan_takes_over(void) {
    cn_scope_begin();
    /* torch.cummax / cummin of [1, 3, 3, nan, 5, nan, 2] */
    const double x[7] = {1, 3, 3, NAN, 5, NAN, 2};
    cn_tensor *t = vec(x, 7, CN_F32), *idx = NULL;
    const double vmax[7] = {1, 3, 3, NAN, NAN, NAN, NAN}, imax[7] = {0, 1, 2, 3, 3, 5, 5};
    const double vmin[7] = {1, 1, 1, NAN, NAN, NAN, NAN}, imin[7] = {0, 0, 0, 3, 3, 5, 5};
    th_check_values("cummax", cn_cummax(t, 0, &idx), vmax, 7, 0);
    th_check_values("cummax indices", idx, imax, 7, 0);
    th_check_values("cummin", cn_cummin(t, 0, &idx), vmin, 7, 0);
    th_check_values("cummin indices", idx, imin, 7, 0);
    /* [3, 1, 1, 0]: cummin's ties move the index on (torch: [0, 1, 2, 3]) */
    const double y[4] = {3, 1, 1, 0}, iy[4] = {0, 1, 2, 3};
    cn_cummin(vec(y, 4, CN_I64), 0, &idx);
    th_check_values("cummin ties", idx, iy, 4, 0);
    cn_scope_end();
}

static void test_max_min_with_indices(void) {
    cn_scope_begin();
    /* torch.max / torch.min of [[1, 3, 3], [nan, 1, nan]] along 1: the first extreme, NaN wins */
    const double x[6] = {1, 3, 3, NAN, 1, NAN};
    const int64_t s[2] = {2, 3};
    cn_tensor *t = th_tensor(x, s, 2, CN_F32), *idx = NULL;
    const double vmax[2] = {3, NAN}, imax[2] = {1, 0}, vmin[2] = {1, NAN}, imin[2] = {0, 0};
    cn_tensor *v = cn_max_dim_indices(t, 1, 0, &idx);
    th_check_values("max values", v, vmax, 2, 0);
    th_check_values("max indices", idx, imax, 2, 0);
    const int64_t kept[2] = {2, 1};
    th_check_shape("max keepdim", cn_max_dim_indices(t, 1, 1, &idx), kept, 2);
    th_check_shape("max keepdim indices", idx, kept, 2);
    th_check_values("min values", cn_min_dim_indices(t, -1, 0, &idx), vmin, 2, 0);
    th_check_values("min indices", idx, imin, 2, 0);
    /* the gradient goes to the selected element only */
    cn_device ad = cn_autodiff(cn_cpu());
    const double y[6] = {1, 5, 2, 7, 0, 7};
    cn_tensor *yt = cn_require_grad(cn_from_data(y, s, 2, CN_F64, ad));
    cn_grads *g = cn_backward(cn_sum(cn_max_dim_indices(yt, 1, 0, NULL)));
    const double want[6] = {0, 1, 0, 1, 0, 0};
    th_check_values("max grad", g ? cn_grad(g, yt) : NULL, want, 6, 0);
    cn_grads_free(g);
    cn_scope_end();
}

static void test_topk(void) {
    cn_scope_begin();
    const double x[4] = {1, NAN, 3, 2};
    cn_tensor *t = vec(x, 4, CN_F64), *idx = NULL;
    /* torch.topk(x, 2) and largest=False */
    const double vl[2] = {NAN, 3}, il[2] = {1, 2}, vs[2] = {1, 2}, is[2] = {0, 3};
    th_check_values("topk largest", cn_topk(t, 2, 0, 1, 1, &idx), vl, 2, 0);
    th_check_values("topk largest indices", idx, il, 2, 0);
    th_check_values("topk smallest", cn_topk(t, 2, -1, 0, 1, &idx), vs, 2, 0);
    th_check_values("topk smallest indices", idx, is, 2, 0);
    /* ties: the first index first (torch.topk([1, 3, 3, 2], 2) -> [1, 2]) */
    const double y[4] = {1, 3, 3, 2}, iy[2] = {1, 2};
    cn_topk(vec(y, 4, CN_I64), 2, 0, 1, 0, &idx);
    th_check_values("topk ties", idx, iy, 2, 0);
    /* k = 0 and k = size */
    const int64_t zero[1] = {0};
    th_check_shape("topk k=0", cn_topk(t, 0, 0, 1, 1, NULL), zero, 1);
    const double all[4] = {1, 2, 3, NAN};
    th_check_values("topk k=size", cn_topk(t, 4, 0, 0, 1, NULL), all, 4, 0);
    /* along dim 0 of a matrix, and the gradient scattered back */
    const double m[6] = {1, 6, 4, 2, 5, 3};
    const int64_t s[2] = {3, 2}, ks[2] = {2, 2};
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *mt = cn_require_grad(cn_from_data(m, s, 2, CN_F64, ad));
    cn_tensor *top = cn_topk(mt, 2, 0, 1, 1, &idx);
    const double vm[4] = {5, 6, 4, 3}, im[4] = {2, 0, 1, 2};
    th_check_shape("topk dim 0", top, ks, 2);
    th_check_values("topk dim 0", top, vm, 4, 0);
    th_check_values("topk dim 0 indices", idx, im, 4, 0);
    const double w[4] = {1, 2, 3, 4};
    cn_grads *g = cn_backward(cn_sum(cn_mul(top, cn_from_data(w, ks, 2, CN_F64, ad))));
    const double want[6] = {0, 2, 3, 0, 1, 4};
    th_check_values("topk grad", g ? cn_grad(g, mt) : NULL, want, 6, 0);
    cn_grads_free(g);
    cn_scope_end();
}

static void test_sort_gradient_scatters_back(void) {
    cn_scope_begin();
    cn_device ad = cn_autodiff(cn_cpu());
    const double x[4] = {0.5, -1, 2, 0};
    int64_t n = 4;
    cn_tensor *xt = cn_require_grad(cn_from_data(x, &n, 1, CN_F64, ad));
    const double w[4] = {1, 10, 100, 1000};
    /* sorted descending: 2 (idx 2), 0.5 (0), 0 (3), -1 (1) */
    cn_grads *g = cn_backward(cn_sum(cn_mul(cn_sort(xt, 0, 1, NULL),
                                            cn_from_data(w, &n, 1, CN_F64, ad))));
    const double want[4] = {10, 1000, 1, 100};
    th_check_values("sort grad", g ? cn_grad(g, xt) : NULL, want, 4, 0);
    cn_grads_free(g);
    /* cummax: each output's weight goes to the element it copied */
    const double y[4] = {1, 3, 2, 4};
    cn_tensor *yt = cn_require_grad(cn_from_data(y, &n, 1, CN_F64, ad));
    g = cn_backward(cn_sum(cn_mul(cn_cummax(yt, 0, NULL), cn_from_data(w, &n, 1, CN_F64, ad))));
    const double want2[4] = {1, 110, 0, 1000};
    th_check_values("cummax grad", g ? cn_grad(g, yt) : NULL, want2, 4, 0);
    cn_grads_free(g);
    cn_scope_end();
}

/* ---- any / all ------------------------------------------------------------------------------- */

static void test_any_all(void) {
    cn_scope_begin();
    const double x[6] = {0, NAN, 0, 0, 0, 0};
    const int64_t s[2] = {2, 3};
    cn_tensor *t = th_tensor(x, s, 2, CN_F32);
    const double f = 0, tr = 1;
    th_check_values("any (NaN is true)", cn_any(t), &tr, 1, 0);
    th_check_values("all", cn_all(t), &f, 1, 0);
    CHECK(cn_ndim(cn_any(t)) == 0 && cn_dtype_of(cn_any(t)) == CN_BOOL);
    const double any1[2] = {1, 0}, any0[3] = {0, 1, 0};
    th_check_values("any dim 1", cn_any_dim(t, 1, 0), any1, 2, 0);
    const int64_t kept[2] = {1, 3};
    th_check_shape("any dim 0 keepdim", cn_any_dim(t, 0, 1), kept, 2);
    th_check_values("any dim 0 keepdim", cn_any_dim(t, 0, 1), any0, 3, 0);
    /* over nothing: any false, all true (torch.any / torch.all of an empty tensor) */
    int64_t zero = 0;
    cn_tensor *e = cn_zeros(&zero, 1, CN_I32, cn_cpu());
    th_check_values("any of nothing", cn_any(e), &f, 1, 0);
    th_check_values("all of nothing", cn_all(e), &tr, 1, 0);
    /* bool, u8 and a 0-d input */
    cn_tensor *b = cn_cast(t, CN_BOOL);
    const double all0[3] = {0, 0, 0};
    th_check_values("all bool", cn_all_dim(b, 0, 0), all0, 3, 0);
    th_check_values("any u8", cn_any(cn_cast(t, CN_U8)), &f, 1, 0); /* NaN -> u8 is 0 */
    const double five = 5;
    cn_tensor *s0 = cn_from_data(&five, NULL, 0, CN_F64, cn_cpu());
    th_check_values("all 0-d", cn_all_dim(s0, 0, 1), &tr, 1, 0);
    CHECK(cn_ndim(cn_all_dim(s0, -1, 1)) == 0);
    cn_scope_end();
}

static void test_max_abs(void) {
    cn_scope_begin();
    const double x[6] = {1, -7, 3, -2, 0.5, 4};
    const int64_t s[2] = {2, 3};
    cn_tensor *t = th_tensor(x, s, 2, CN_F64);
    const double m = 7, md[2] = {7, 4};
    th_check_values("max_abs", cn_max_abs(t), &m, 1, 0);
    th_check_values("max_abs_dim", cn_max_abs_dim(t, 1, 0), md, 2, 0);
    th_check_values("max_abs i64", cn_max_abs(cn_cast(t, CN_I64)), &m, 1, 0);
    cn_scope_end();
}

/* ---- strided, long and 0-d inputs against a plain loop ---------------------------------------- */

static void test_strided_and_long_rows(void) {
    cn_scope_begin();
    /* a transposed input: the scan runs down the columns of memory */
    const int64_t s[2] = {3, 4};
    double x[12];
    for (int i = 0; i < 12; i++) x[i] = (double)((i * 5) % 7) - 3;
    cn_tensor *t = cn_transpose(th_tensor(x, s, 2, CN_F64), 0, 1); /* [4, 3] */
    double want[12];
    for (int r = 0; r < 4; r++) { /* cumsum along dim 1 of t: along dim 0 of x */
        double acc = 0;
        for (int c = 0; c < 3; c++) want[r * 3 + c] = acc += x[c * 4 + r];
    }
    th_check_values("cumsum transposed", cn_cumsum(t, 1), want, 12, 0);
    /* long rows split across threads: each row is still summed in order */
    const int64_t big[2] = {3, 40000};
    cn_tensor *ones = cn_ones(big, 2, CN_I64, cn_cpu());
    double *v = th_values(cn_cumsum(ones, 1));
    int ok = v != NULL;
    for (int64_t i = 0; ok && i < 3 * 40000; i++) ok = v[i] == (double)(i % 40000 + 1);
    CHECK(ok);
    free(v);
    /* many rows along dim 0 */
    cn_tensor *cols = cn_cumsum(ones, 0);
    v = th_values(cols);
    ok = v != NULL;
    for (int64_t i = 0; ok && i < 3 * 40000; i++) ok = v[i] == (double)(i / 40000 + 1);
    CHECK(ok);
    free(v);
    /* a long sort: ascending, and the indices are a permutation that reads the values back */
    const int64_t n = 50001;
    double *r = th_alloc_doubles(n);
    uint64_t seed = 7;
    th_fill_eighths(&seed, r, n);
    cn_tensor *big1 = cn_from_data(r, &n, 1, CN_F64, cn_cpu()), *idx = NULL;
    double *sv = th_values(cn_sort(big1, 0, 0, &idx)), *iv = th_values(idx);
    ok = sv && iv;
    for (int64_t i = 1; ok && i < n; i++) {
        ok = sv[i - 1] <= sv[i] && r[(int64_t)iv[i]] == sv[i];
        if (sv[i - 1] == sv[i]) ok = ok && iv[i - 1] < iv[i]; /* stable */
    }
    CHECK(ok);
    free(sv);
    free(iv);
    free(r);
    /* a 0-d input is one element */
    const double five = 5;
    cn_tensor *s0 = cn_from_data(&five, NULL, 0, CN_F64, cn_cpu());
    cn_tensor *c0 = cn_cumprod(s0, 0);
    CHECK(c0 && cn_ndim(c0) == 0);
    th_check_values("cumprod 0-d", c0, &five, 1, 0);
    const double zero_idx = 0;
    th_check_values("sort 0-d", cn_sort(s0, -1, 0, &idx), &five, 1, 0);
    th_check_values("sort 0-d indices", idx, &zero_idx, 1, 0);
    cn_tensor *k1 = cn_topk(s0, 1, 0, 1, 1, &idx);
    CHECK(k1 && cn_ndim(k1) == 0 && idx && cn_ndim(idx) == 0);
    th_check_values("topk 0-d", k1, &five, 1, 0);
    const int64_t none[1] = {0};
    th_check_shape("topk 0-d k=0", cn_topk(s0, 0, 0, 1, 1, NULL), none, 1);
    /* an empty dim: empty results */
    const int64_t e[2] = {2, 0};
    cn_tensor *et = cn_zeros(e, 2, CN_F32, cn_cpu());
    th_check_shape("cumsum of nothing", cn_cumsum(et, 1), e, 2);
    th_check_shape("sort of nothing", cn_sort(et, 1, 0, &idx), e, 2);
    th_check_shape("sort of nothing indices", idx, e, 2);
    cn_scope_end();
}

/* ---- errors ------------------------------------------------------------------------------------ */

static void test_misuse(void) {
    cn_scope_begin();
    const double x[6] = {1, 2, 3, 4, 5, 6};
    const int64_t s[2] = {2, 3};
    cn_tensor *t = th_tensor(x, s, 2, CN_F32);
    CHECK_FAILS(cn_cumsum(t, 2), CN_ERR_INVALID_ARG, "dim = 2 is out of range");
    CHECK_FAILS(cn_cumprod(t, -3), CN_ERR_INVALID_ARG, "dim = -3");
    CHECK_FAILS(cn_cumsum(NULL, 0), CN_ERR_NULL_ARG, "cumsum");
    CHECK_FAILS(cn_cumsum(cn_cast(t, CN_BOOL), 0), CN_ERR_KIND, "cumsum takes float or int");
    cn_tensor *idx = t; /* must come back NULL on failure */
    CHECK_FAILS(cn_sort(t, 5, 0, &idx), CN_ERR_INVALID_ARG, "sort");
    CHECK(idx == NULL);
    idx = t;
    CHECK_FAILS(cn_cummax(cn_cast(t, CN_BOOL), 0, &idx), CN_ERR_KIND, "cummax");
    CHECK(idx == NULL);
    CHECK_FAILS(cn_argsort(NULL, 0, 0), CN_ERR_NULL_ARG, "argsort");
    idx = t;
    CHECK_FAILS(cn_topk(t, 4, 1, 1, 1, &idx), CN_ERR_INVALID_ARG, "k = 4 is out of range");
    CHECK(idx == NULL);
    CHECK_FAILS(cn_topk(t, -1, 1, 1, 1, NULL), CN_ERR_INVALID_ARG, "pass k in [0, 3]");
    CHECK_FAILS(cn_topk(t, 1, 2, 1, 1, NULL), CN_ERR_INVALID_ARG, "dim = 2");
    CHECK_FAILS(cn_topk(NULL, 1, 0, 1, 1, NULL), CN_ERR_NULL_ARG, "topk");
    idx = t;
    CHECK_FAILS(cn_max_dim_indices(t, 3, 0, &idx), CN_ERR_INVALID_ARG, "dim = 3");
    CHECK(idx == NULL);
    const int64_t e[2] = {2, 0};
    CHECK_FAILS(cn_max_dim_indices(cn_zeros(e, 2, CN_F32, cn_cpu()), 1, 0, NULL), CN_ERR_SHAPE,
                "empty");
    CHECK_FAILS(cn_any_dim(t, 2, 0), CN_ERR_INVALID_ARG, "dim = 2");
    CHECK_FAILS(cn_all(NULL), CN_ERR_NULL_ARG, "all");
    /* x is untouched by any of it */
    th_check_values("x untouched", t, x, 6, 0);
    cn_scope_end();
}

/* ---- allocation failures ---------------------------------------------------------------------- */

/* Every scan and sort on the autodiff device and back: L's gradient as one sum, or NAN on failure
 * (every tensor released either way). */
static double scan_everything(cn_tensor *x) {
    double out = NAN;
    if (cn_scope_begin() != CN_OK) return out;
    cn_tensor *idx = NULL, *idx2 = NULL;
    cn_tensor *a = cn_cumsum(x, 1), *b = cn_cumprod(x, 0), *c = cn_cummax(x, 1, &idx);
    cn_tensor *d = cn_sort(x, 0, 1, &idx2), *e = cn_topk(x, 2, 1, 0, 1, NULL);
    cn_tensor *f = cn_max_dim_indices(x, 1, 1, NULL), *anyx = cn_any_dim(x, 0, 0);
    cn_tensor *l = NULL;
    if (a && b && c && d && e && f && anyx && idx && idx2) {
        l = cn_add(cn_add(cn_sum(a), cn_sum(cn_mul(b, b))), cn_add(cn_sum(c), cn_sum(d)));
        l = cn_add(l, cn_add(cn_sum(e), cn_sum(f)));
    }
    cn_grads *g = l ? cn_backward(l) : NULL;
    cn_tensor *gx = g ? cn_grad(g, x) : NULL;
    cn_tensor *s = gx ? cn_sum(gx) : NULL;
    double v;
    if (s && cn_read(s, &v, sizeof v) == CN_OK) out = v;
    cn_grads_free(g);
    cn_release(idx);
    cn_release(idx2);
    cn_scope_end();
    return out;
}

static void test_allocation_failures_are_clean(void) {
    const double v[12] = {0.5, -1.25, 2, 0.75, 1.5, -0.25, 1, -2, 0.125, 3, -0.5, 1.75};
    const int64_t s[2] = {3, 4};
    cn_tensor *x = cn_require_grad(cn_from_data(v, s, 2, CN_F64, cn_autodiff(cn_cpu())));
    int64_t before = cn_alloc_count();
    double want = scan_everything(x);
    int64_t count = cn_alloc_count() - before;
    CHECK(!isnan(want) && count > 10);
    int64_t live = cn_live_tensors(), failed = 0;
    for (int64_t k = 1; k <= count; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        double got = scan_everything(x);
        cn_alloc_fail_after(0);
        failed += isnan(got);
        if (isnan(got) && cn_last_status() != CN_ERR_OUT_OF_MEMORY) {
            fprintf(stderr, "allocation %lld: failed with %s (%s)\n", (long long)k,
                    cn_status_name(cn_last_status()), cn_last_error());
            th_checks_failed++;
        }
        if (!isnan(got) && got != want) {
            fprintf(stderr, "allocation %lld: %.17g, want %.17g\n", (long long)k, got, want);
            th_checks_failed++;
        }
        if (cn_live_tensors() != live) {
            fprintf(stderr, "allocation %lld: %lld tensors leaked\n", (long long)k,
                    (long long)(cn_live_tensors() - live));
            th_checks_failed++;
            live = cn_live_tensors();
        }
    }
    CHECK(failed == count); /* every allocation is needed: each failure fails the run */
    cn_clear_error();
    CHECK(scan_everything(x) == want); /* and the runtime still works */
    cn_release(x);
}

int main(void) {
    RUN(test_cumprod_gradient_with_zeros);
    RUN(test_cumsum_gradient_is_the_reverse_cumsum);
    RUN(test_sort_places_nan_last_and_keeps_ties_in_order);
    RUN(test_cummax_takes_the_last_tie_and_nan_takes_over);
    RUN(test_max_min_with_indices);
    RUN(test_topk);
    RUN(test_sort_gradient_scatters_back);
    RUN(test_any_all);
    RUN(test_max_abs);
    RUN(test_strided_and_long_rows);
    RUN(test_misuse);
    RUN(test_allocation_failures_are_clean);
    return th_finish();
}
