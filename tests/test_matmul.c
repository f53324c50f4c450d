/* cn_matmul and cn_linear against a double-precision triple loop written here: plain, batched
 * with broadcast batch dims, 1-D operands (numpy.matmul promotion), transposed and sliced
 * (non-contiguous) inputs, empty dims, and the router's errors. */
#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* Deterministic values k/8 (th_fill_eighths) from this test's own sequence. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static int64_t prod(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* A tensor of random values; the values (row-major) are written to *vals (caller frees). */
static cn_tensor *rand_tensor(const int64_t *shape, int ndim, cn_dtype dt, double **vals) {
    int64_t n = prod(shape, ndim);
    double *v = th_alloc_doubles(n);
    th_fill_eighths(&rng_state, v, n);
    *vals = v;
    return th_own(th_tensor(v, shape, ndim, dt));
}

/* The reference: out = a @ b for a [.., M, K], b [.., K, N] (both ndim >= 2), batch dims
 * broadcast with numpy rules. Writes the result shape into oshape/ondim; returns malloc'd data. */
static double *ref_matmul(const double *a, const int64_t *as, int an, const double *b,
                          const int64_t *bs, int bn, int64_t *oshape, int *ondim) {
    int nb = (an > bn ? an : bn) - 2;
    int64_t M = as[an - 2], K = as[an - 1], N = bs[bn - 1];
    int64_t ab[CN_MAX_DIMS], bb[CN_MAX_DIMS]; /* batch shapes, left-padded with 1 */
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - (an - 2)), db = d - (nb - (bn - 2));
        ab[d] = da >= 0 ? as[da] : 1;
        bb[d] = db >= 0 ? bs[db] : 1;
        oshape[d] = ab[d] > bb[d] ? ab[d] : bb[d];
    }
    oshape[nb] = M;
    oshape[nb + 1] = N;
    *ondim = nb + 2;
    int64_t count = prod(oshape, nb);
    double *out = th_alloc_doubles(count * M * N);
    for (int64_t i = 0; i < count; i++) {
        int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t idx = rem % oshape[d];
            rem /= oshape[d];
            ia += (ab[d] == 1 ? 0 : idx) * sa;
            ib += (bb[d] == 1 ? 0 : idx) * sb;
            sa *= ab[d];
            sb *= bb[d];
        }
        const double *A = a + ia * M * K, *B = b + ib * K * N;
        double *C = out + i * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += A[m * K + k] * B[k * N + n];
                C[m * N + n] = s;
            }
    }
    return out;
}

/* Checks cn_matmul(a, b) for random a: ashape, b: bshape (both ndim >= 2). */
static void check_matmul(const char *what, const int64_t *as, int an, const int64_t *bs, int bn,
                         cn_dtype dt) {
    double *av, *bv;
    cn_tensor *a = rand_tensor(as, an, dt, &av), *b = rand_tensor(bs, bn, dt, &bv);
    int64_t oshape[CN_MAX_DIMS];
    int ondim;
    double *want = ref_matmul(av, as, an, bv, bs, bn, oshape, &ondim);
    cn_tensor *c = th_own(cn_matmul(a, b));
    th_check_shape(what, c, oshape, ondim);
    th_check_values(what, c, want, prod(oshape, ondim), th_tol_of(dt));
    CHECK(!c || cn_dtype_of(c) == dt);
    free(av);
    free(bv);
    free(want);
}

/* The transpose of a row-major [R, C] matrix (batched over the leading `batch` matrices). */
static double *transposed(const double *v, int64_t batch, int64_t R, int64_t C) {
    double *t = th_alloc_doubles(batch * R * C);
    for (int64_t i = 0; i < batch; i++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) t[i * R * C + c * R + r] = v[i * R * C + r * C + c];
    return t;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_2d_matches_reference(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        check_matmul("2d small", (int64_t[]){7, 5}, 2, (int64_t[]){5, 3}, 2, dts[i]);
        check_matmul("2d 1x1", (int64_t[]){1, 1}, 2, (int64_t[]){1, 1}, 2, dts[i]);
        check_matmul("2d row times matrix", (int64_t[]){1, 9}, 2, (int64_t[]){9, 4}, 2, dts[i]);
        check_matmul("2d column times row", (int64_t[]){6, 1}, 2, (int64_t[]){1, 5}, 2, dts[i]);
        check_matmul("2d odd sizes", (int64_t[]){65, 33}, 2, (int64_t[]){33, 17}, 2, dts[i]);
        check_matmul("2d big (threaded BLAS)", (int64_t[]){96, 80}, 2, (int64_t[]){80, 72}, 2,
                     dts[i]);
    }
    th_release_owned();
}

/* Many small products of sliced (packed) operands: the batch runs on several threads, each
 * packing into scratch of its own; first a alone needs packing, then both. */
static void check_many_sliced(cn_dtype dt) {
    const int64_t B = 64, M = 16, K = 12, N = 20;
    double *wide_a, *wide_b;
    cn_tensor *wa = rand_tensor((int64_t[]){B, M, 2 * K}, 3, dt, &wide_a);
    cn_tensor *wb = rand_tensor((int64_t[]){B, K, 2 * N}, 3, dt, &wide_b);
    cn_tensor *a = th_own(cn_slice(wa, 2, 0, 2 * K, 2)); /* [B, M, K], column stride 2 */
    cn_tensor *b = th_own(cn_slice(wb, 2, 0, N, 1));     /* [B, K, N], row stride 2N: direct */
    cn_tensor *bs = th_own(cn_slice(wb, 2, 1, 2 * N, 2)); /* [B, K, N], column stride 2 */
    double *a_v = th_alloc_doubles(B * M * K), *b_v = th_alloc_doubles(B * K * N);
    double *bs_v = th_alloc_doubles(B * K * N);
    for (int64_t r = 0; r < B * M; r++)
        for (int64_t k = 0; k < K; k++) a_v[r * K + k] = wide_a[r * 2 * K + 2 * k];
    for (int64_t r = 0; r < B * K; r++)
        for (int64_t n = 0; n < N; n++) {
            b_v[r * N + n] = wide_b[r * 2 * N + n];
            bs_v[r * N + n] = wide_b[r * 2 * N + 2 * n + 1];
        }
    int64_t os[CN_MAX_DIMS];
    int on;
    double *want = ref_matmul(a_v, (int64_t[]){B, M, K}, 3, b_v, (int64_t[]){B, K, N}, 3, os,
                              &on);
    th_check_values("many small, a sliced", th_own(cn_matmul(a, b)), want, B * M * N,
                    th_tol_of(dt));
    double *want2 = ref_matmul(a_v, (int64_t[]){B, M, K}, 3, bs_v, (int64_t[]){B, K, N}, 3, os,
                               &on);
    th_check_values("many small, both sliced", th_own(cn_matmul(a, bs)), want2, B * M * N,
                    th_tol_of(dt));
    free(wide_a);
    free(wide_b);
    free(a_v);
    free(b_v);
    free(bs_v);
    free(want);
    free(want2);
}

static void test_batched_with_broadcast_batch_dims(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        check_matmul("3d", (int64_t[]){4, 3, 5}, 3, (int64_t[]){4, 5, 2}, 3, dt);
        check_matmul("[2,1,3,4] @ [5,4,2]", (int64_t[]){2, 1, 3, 4}, 4, (int64_t[]){5, 4, 2}, 3,
                     dt);
        check_matmul("4d both broadcast", (int64_t[]){3, 1, 2, 4}, 4,
                     (int64_t[]){1, 2, 4, 3}, 4, dt);
        check_matmul("3d @ shared 2d", (int64_t[]){3, 6, 5}, 3, (int64_t[]){5, 4}, 2, dt);
        check_matmul("4d @ shared 2d", (int64_t[]){2, 3, 6, 5}, 4, (int64_t[]){5, 4}, 2, dt);
        check_matmul("shared 2d @ 3d", (int64_t[]){6, 5}, 2, (int64_t[]){3, 5, 4}, 3, dt);
        check_matmul("[1,M,K] @ [B,K,N]", (int64_t[]){1, 2, 3}, 3, (int64_t[]){4, 3, 2}, 3, dt);
        check_matmul("many small (threaded batch)", (int64_t[]){64, 16, 12}, 3,
                     (int64_t[]){64, 12, 20}, 3, dt);
        check_many_sliced(dt);
        check_matmul("many 1-row matrices @ shared", (int64_t[]){40, 1, 7}, 3,
                     (int64_t[]){7, 3}, 2, dt);
    }
    th_release_owned();
}

static void test_one_dim_operands_promote_like_numpy(void) {
    double *av, *bv, *cv, *dv;
    cn_tensor *a = rand_tensor((int64_t[]){4}, 1, CN_F64, &av);
    cn_tensor *b = rand_tensor((int64_t[]){4}, 1, CN_F64, &bv);
    cn_tensor *m = rand_tensor((int64_t[]){3, 4}, 2, CN_F64, &cv);  /* [3, 4] */
    cn_tensor *bm = rand_tensor((int64_t[]){2, 4, 3}, 3, CN_F64, &dv); /* [2, 4, 3] */

    /* vector . vector -> 0-d */
    double dot = 0;
    for (int k = 0; k < 4; k++) dot += av[k] * bv[k];
    cn_tensor *r = th_own(cn_matmul(a, b));
    CHECK(r && cn_ndim(r) == 0);
    th_check_values("vec @ vec", r, &dot, 1, 1e-12);

    /* matrix @ vector -> [3] */
    double mv[3];
    for (int i = 0; i < 3; i++) {
        mv[i] = 0;
        for (int k = 0; k < 4; k++) mv[i] += cv[i * 4 + k] * av[k];
    }
    r = th_own(cn_matmul(m, a));
    th_check_shape("mat @ vec", r, (int64_t[]){3}, 1);
    th_check_values("mat @ vec", r, mv, 3, 1e-12);

    /* vector @ matrix: [4] @ [4, 3] (the transpose of m's data read as [4, 3]) */
    cn_tensor *mt = th_own(cn_transpose(m, 0, 1)); /* [4, 3] */
    double vm[3];
    for (int j = 0; j < 3; j++) {
        vm[j] = 0;
        for (int k = 0; k < 4; k++) vm[j] += av[k] * cv[j * 4 + k];
    }
    r = th_own(cn_matmul(a, mt));
    th_check_shape("vec @ mat", r, (int64_t[]){3}, 1);
    th_check_values("vec @ mat", r, vm, 3, 1e-12);

    /* vector @ batched: [4] @ [2, 4, 3] -> [2, 3] */
    double vb[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            vb[i * 3 + j] = 0;
            for (int k = 0; k < 4; k++) vb[i * 3 + j] += av[k] * dv[i * 12 + k * 3 + j];
        }
    r = th_own(cn_matmul(a, bm));
    th_check_shape("vec @ batched", r, (int64_t[]){2, 3}, 2);
    th_check_values("vec @ batched", r, vb, 6, 1e-12);

    /* batched @ vector: [2, 3, 4] (bm transposed) @ [4] -> [2, 3] */
    cn_tensor *bmt = th_own(cn_transpose(bm, 1, 2));
    r = th_own(cn_matmul(bmt, a));
    th_check_shape("batched @ vec", r, (int64_t[]){2, 3}, 2);
    th_check_values("batched @ vec", r, vb, 6, 1e-12);

    free(av);
    free(bv);
    free(cv);
    free(dv);
    th_release_owned();
}

/* a and b given as views that BLAS cannot always read directly. */
static void test_transposed_and_sliced_inputs(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        const int64_t B = 3, M = 5, K = 6, N = 4;
        double *at_v, *bt_v, *wide_v, *bw_v;
        /* a^T stored as [B, K, M], b^T as [B, N, K]: transposing gives column-major views */
        cn_tensor *at = rand_tensor((int64_t[]){B, K, M}, 3, dt, &at_v);
        cn_tensor *bt = rand_tensor((int64_t[]){B, N, K}, 3, dt, &bt_v);
        cn_tensor *a = th_own(cn_transpose(at, 1, 2)), *b = th_own(cn_transpose(bt, 1, 2));
        CHECK(a && !cn_is_contiguous(a));
        double *a_v = transposed(at_v, B, K, M), *b_v = transposed(bt_v, B, N, K);
        int64_t os[CN_MAX_DIMS];
        int on;
        double *want = ref_matmul(a_v, (int64_t[]){B, M, K}, 3, b_v, (int64_t[]){B, K, N}, 3,
                                  os, &on);
        th_check_values("a^T-view @ b^T-view", th_own(cn_matmul(a, b)), want, B * M * N,
                        th_tol_of(dt));

        /* a sliced with step 2 along K: neither row- nor column-major, so it is packed */
        cn_tensor *wide = rand_tensor((int64_t[]){B, M, 2 * K}, 3, dt, &wide_v);
        cn_tensor *as = th_own(cn_slice(wide, 2, 0, 2 * K, 2));
        double *as_v = malloc(sizeof(double) * (size_t)(B * M * K));
        for (int64_t r = 0; r < B * M; r++)
            for (int64_t k = 0; k < K; k++) as_v[r * K + k] = wide_v[r * 2 * K + 2 * k];
        double *want2 = ref_matmul(as_v, (int64_t[]){B, M, K}, 3, b_v, (int64_t[]){B, K, N}, 3,
                                   os, &on);
        th_check_values("sliced a @ b^T-view", th_own(cn_matmul(as, b)), want2, B * M * N,
                        th_tol_of(dt));

        /* the sliced a against one shared (2-D, transposed) b: the folded single GEMM with a
         * packed */
        cn_tensor *b0 = th_own(cn_slice(b, 0, 0, 1, 1));
        cn_tensor *b2 = th_own(cn_squeeze(b0, 0)); /* [K, N], column-major */
        double *want3 = ref_matmul(as_v, (int64_t[]){B, M, K}, 3, b_v, (int64_t[]){K, N}, 2, os,
                                   &on);
        th_check_values("sliced a @ shared b^T-view", th_own(cn_matmul(as, b2)), want3, B * M * N,
                        th_tol_of(dt));

        /* an expanded (stride-0) batch dim on b, given explicitly */
        cn_tensor *be = th_own(cn_expand(b2, (int64_t[]){B, K, N}, 3));
        double *want4 = ref_matmul(a_v, (int64_t[]){B, M, K}, 3, b_v, (int64_t[]){K, N}, 2, os,
                                   &on);
        th_check_values("a^T-view @ expanded b", th_own(cn_matmul(a, be)), want4, B * M * N,
                        th_tol_of(dt));

        /* 2-D, both sliced: both packed */
        cn_tensor *bw = rand_tensor((int64_t[]){K, 2 * N}, 2, dt, &bw_v);
        cn_tensor *bs2 = th_own(cn_slice(bw, 1, 1, 2 * N, 2));
        double *bs_v = th_alloc_doubles(K * N);
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++) bs_v[k * N + n] = bw_v[k * 2 * N + 2 * n + 1];
        cn_tensor *as2 = th_own(cn_squeeze(th_own(cn_slice(as, 0, 1, 2, 1)), 0)); /* as[1] */
        double *want5 = ref_matmul(as_v + M * K, (int64_t[]){M, K}, 2, bs_v, (int64_t[]){K, N},
                                   2, os, &on);
        th_check_values("2d sliced a @ sliced b", th_own(cn_matmul(as2, bs2)), want5, M * N,
                        th_tol_of(dt));

        free(at_v);
        free(bt_v);
        free(wide_v);
        free(a_v);
        free(b_v);
        free(as_v);
        free(want);
        free(want2);
        free(want3);
        free(want4);
        free(want5);
        free(bw_v);
        free(bs_v);
    }
    th_release_owned();
}

static void test_empty_dims(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        /* K = 0: an empty sum, so zeros */
        cn_tensor *a = th_own(cn_zeros((int64_t[]){3, 0}, 2, dts[i], cn_cpu()));
        cn_tensor *b = th_own(cn_zeros((int64_t[]){0, 4}, 2, dts[i], cn_cpu()));
        cn_tensor *c = th_own(cn_matmul(a, b));
        th_check_shape("K = 0", c, (int64_t[]){3, 4}, 2);
        double zeros[12] = {0};
        th_check_values("K = 0", c, zeros, 12, 0);

        /* batched K = 0 */
        cn_tensor *ab = th_own(cn_zeros((int64_t[]){2, 3, 0}, 3, dts[i], cn_cpu()));
        cn_tensor *bb = th_own(cn_zeros((int64_t[]){2, 0, 2}, 3, dts[i], cn_cpu()));
        cn_tensor *cb = th_own(cn_matmul(ab, bb));
        th_check_shape("batched K = 0", cb, (int64_t[]){2, 3, 2}, 3);
        th_check_values("batched K = 0", cb, zeros, 12, 0);

        /* M = 0, N = 0, batch = 0 */
        cn_tensor *m0 = th_own(cn_zeros((int64_t[]){0, 3}, 2, dts[i], cn_cpu()));
        cn_tensor *k3 = th_own(cn_ones((int64_t[]){3, 2}, 2, dts[i], cn_cpu()));
        th_check_shape("M = 0", th_own(cn_matmul(m0, k3)), (int64_t[]){0, 2}, 2);
        cn_tensor *n0 = th_own(cn_zeros((int64_t[]){3, 0}, 2, dts[i], cn_cpu()));
        cn_tensor *a2 = th_own(cn_ones((int64_t[]){4, 3}, 2, dts[i], cn_cpu()));
        th_check_shape("N = 0", th_own(cn_matmul(a2, n0)), (int64_t[]){4, 0}, 2);
        cn_tensor *z = th_own(cn_zeros((int64_t[]){0, 4, 3}, 3, dts[i], cn_cpu()));
        th_check_shape("batch = 0", th_own(cn_matmul(z, k3)), (int64_t[]){0, 4, 2}, 3);
    }
    th_release_owned();
}

static void test_linear_with_and_without_bias(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        const int64_t B = 2, T = 3, IN = 5, OUT = 4;
        double *xv, *wv, *bv;
        cn_tensor *x = rand_tensor((int64_t[]){B, T, IN}, 3, dt, &xv);
        cn_tensor *w = rand_tensor((int64_t[]){OUT, IN}, 2, dt, &wv);
        cn_tensor *b = rand_tensor((int64_t[]){OUT}, 1, dt, &bv);
        double want[2 * 3 * 4], want_nb[2 * 3 * 4];
        for (int64_t r = 0; r < B * T; r++)
            for (int64_t o = 0; o < OUT; o++) {
                double s = 0;
                for (int64_t k = 0; k < IN; k++) s += xv[r * IN + k] * wv[o * IN + k];
                want_nb[r * OUT + o] = s;
                want[r * OUT + o] = s + bv[o];
            }
        cn_tensor *y = th_own(cn_linear(x, w, b));
        th_check_shape("linear", y, (int64_t[]){B, T, OUT}, 3);
        th_check_values("linear", y, want, B * T * OUT, th_tol_of(dt));
        cn_tensor *y2 = th_own(cn_linear(x, w, NULL));
        th_check_shape("linear without bias", y2, (int64_t[]){B, T, OUT}, 3);
        th_check_values("linear without bias", y2, want_nb, B * T * OUT, th_tol_of(dt));
        free(xv);
        free(wv);
        free(bv);
    }
    th_release_owned();
}

static void test_router_rejects_bad_operands(void) {
    cn_tensor *a = th_own(cn_ones((int64_t[]){2, 3}, 2, CN_F32, cn_cpu()));
    cn_tensor *b = th_own(cn_ones((int64_t[]){4, 2}, 2, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_matmul(a, b), CN_ERR_SHAPE, "matmul");
    cn_tensor *ia = th_own(cn_ones((int64_t[]){2, 3}, 2, CN_I32, cn_cpu()));
    cn_tensor *bb = th_own(cn_ones((int64_t[]){3, 2}, 2, CN_BOOL, cn_cpu()));
    CHECK_FAILS(cn_matmul(ia, bb), CN_ERR_KIND, "matmul");
    cn_tensor *ib64 = th_own(cn_ones((int64_t[]){3, 2}, 2, CN_I64, cn_cpu()));
    CHECK_FAILS(cn_matmul(ia, ib64), CN_ERR_DTYPE, "matmul");
    cn_tensor *u8 = th_own(cn_ones((int64_t[]){3, 2}, 2, CN_U8, cn_cpu()));
    cn_tensor *u8a = th_own(cn_ones((int64_t[]){2, 3}, 2, CN_U8, cn_cpu()));
    cn_clear_error();
    cn_tensor *r = cn_matmul(u8a, u8); /* u8: no kernel (burn and PyTorch: i32/i64) */
    CHECK(r == NULL && cn_last_status() != CN_OK && strstr(cn_last_error(), "matmul"));
    cn_release(r);
    cn_clear_error();
    cn_tensor *d = th_own(cn_ones((int64_t[]){3, 2}, 2, CN_F64, cn_cpu()));
    CHECK_FAILS(cn_matmul(a, d), CN_ERR_DTYPE, "matmul");
    /* batch dims that do not broadcast */
    cn_tensor *a3 = th_own(cn_ones((int64_t[]){2, 2, 3}, 3, CN_F32, cn_cpu()));
    cn_tensor *b3 = th_own(cn_ones((int64_t[]){3, 3, 2}, 3, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_matmul(a3, b3), CN_ERR_SHAPE, "matmul");
    th_release_owned();
}

/* The kernel itself refuses views the router would never pass, instead of reading past them. */
static void test_kernel_rejects_inconsistent_views(void) {
    float a[6] = {0}, b[6] = {0}, c[4] = {0};
    cn_view v[3] = {
        {a, CN_F32, 2, {2, 3}, {3, 1}},
        {b, CN_F32, 2, {2, 3}, {3, 1}}, /* K = 2, not 3 */
        {c, CN_F32, 2, {2, 2}, {2, 1}},
    };
    cn_kernel_args args = {.op = CN_OP_MATMUL, .n_in = 2, .in = v, .n_out = 1, .out = &v[2]};
    cn_kernel_fn k = cn_backend_get(CN_BACKEND_CPU)->kernels[CN_OP_MATMUL];
    cn_clear_error();
    CHECK(k(&args) == CN_ERR_SHAPE);
    CHECK(strstr(cn_last_error(), "matmul") != NULL);
    v[1].shape[0] = 3;
    v[1].shape[1] = 2;
    v[1].strides[0] = 2;
    cn_clear_error();
    CHECK(k(&args) == CN_OK); /* consistent now */
    v[0].ndim = v[1].ndim = v[2].ndim = 1;
    CHECK(k(&args) == CN_ERR_SHAPE);
    cn_clear_error();
}

/* cn_cpu_gemm, the GEMM extension kernels call: c = a @ b + beta c for each storage of a and b,
 * f32 and f64, against a double reference; its refusals write nothing. */
static void test_cpu_gemm_for_extensions(void) {
    enum { M = 5, N = 7, K = 9, LD = 12, SZ = K * LD }; /* SZ: the largest storage */
    double a[SZ], at[SZ], b[SZ], bt[SZ], c0[SZ];
    for (int i = 0; i < SZ; i++) c0[i] = 0.25 * (i % 5) - 0.5, a[i] = at[i] = b[i] = bt[i] = 0;
    for (int i = 0; i < M; i++)
        for (int p = 0; p < K; p++) a[i * LD + p] = at[p * LD + i] = 0.125 * ((i * 3 + p) % 7) - 0.375;
    for (int p = 0; p < K; p++)
        for (int j = 0; j < N; j++) b[p * LD + j] = bt[j * LD + p] = 0.25 * ((p + 2 * j) % 5) - 0.5;
    for (int dt = 0; dt < 2; dt++) {
        cn_dtype dtype = dt ? CN_F64 : CN_F32;
        for (int form = 0; form < 4; form++) {
            int ta = form & 1, tb = form >> 1;
            double beta = form == 3 ? 1.0 : 0.0;
            float af[SZ], bf[SZ], cf[SZ];
            double ad[SZ], bd[SZ], cd[SZ];
            const double *as = ta ? at : a, *bs = tb ? bt : b;
            for (int i = 0; i < SZ; i++) {
                af[i] = (float)as[i], ad[i] = as[i], bf[i] = (float)bs[i], bd[i] = bs[i];
                cf[i] = (float)c0[i], cd[i] = c0[i];
            }
            cn_status st = dt ? cn_cpu_gemm(dtype, ta, tb, M, N, K, ad, LD, bd, LD, beta, cd, LD)
                              : cn_cpu_gemm(dtype, ta, tb, M, N, K, af, LD, bf, LD, beta, cf, LD);
            CHECK(st == CN_OK);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < LD; j++) {
                    double want = c0[i * LD + j]; /* past column N: untouched */
                    if (j < N) {
                        double acc = 0;
                        for (int p = 0; p < K; p++) acc += a[i * LD + p] * b[p * LD + j];
                        want = acc + beta * c0[i * LD + j];
                    }
                    CHECK_NEAR(dt ? cd[i * LD + j] : cf[i * LD + j], want, dt ? 1e-14 : 1e-6);
                }
        }
    }
    double c[SZ];
    memcpy(c, c0, sizeof c);
    CHECK_STATUS_FAILS(cn_cpu_gemm(CN_I32, 0, 0, M, N, K, a, LD, b, LD, 0, c, LD),
                       CN_ERR_INVALID_ARG, "f32 or f64");
    CHECK_STATUS_FAILS(cn_cpu_gemm(CN_F64, 0, 0, -1, N, K, a, LD, b, LD, 0, c, LD),
                       CN_ERR_INVALID_ARG, "negative size");
    CHECK_STATUS_FAILS(cn_cpu_gemm(CN_F64, 0, 0, M, N, K, a, K - 1, b, LD, 0, c, LD),
                       CN_ERR_INVALID_ARG, "lda 8 for 9");
    CHECK_STATUS_FAILS(cn_cpu_gemm(CN_F64, 0, 0, M, N, K, NULL, LD, b, LD, 0, c, LD),
                       CN_ERR_NULL_ARG, "'a'");
    CHECK_STATUS_FAILS(cn_cpu_gemm(CN_F64, 0, 0, M, N, K, a, LD, b, LD, 0, c, N - 1),
                       CN_ERR_INVALID_ARG, "ldc 6 for 7");
    CHECK_STATUS_FAILS(cn_cpu_gemm(CN_F64, 0, 0, (int64_t)1 << 32, N, K, a, LD, b, LD, 0, c, LD),
                       CN_ERR_OVERFLOW, "split the product");
    for (int i = 0; i < SZ; i++) CHECK(c[i] == c0[i]);
}

/* i32 and i64 (burn's int_matmul): by hand, batched with a broadcast batch dim and a transposed
 * operand; i32 products and sums wrap. */
static void test_integer_matmul(void) {
    const cn_dtype dts[2] = {CN_I32, CN_I64};
    for (int d = 0; d < 2; d++) {
        double av[12] = {1, -2, 3, 0, 4, 5, -1, 2, 0, 3, 1, -4}; /* [2, 2, 3] */
        double bv[6] = {2, -1, 0, 3, 5, 1};                      /* [3, 2] */
        cn_tensor *a = th_own(th_tensor(av, (int64_t[]){2, 2, 3}, 3, dts[d]));
        cn_tensor *b = th_own(th_tensor(bv, (int64_t[]){3, 2}, 2, dts[d]));
        /* row (1, -2, 3): (2 + 0 + 15, -1 - 6 + 3) = (17, -4); (0, 4, 5): (25, 17);
         * (-1, 2, 0): (-2, 7); (3, 1, -4): (-14, -4) */
        cn_tensor *c = th_own(cn_matmul(a, b));
        th_check_values("int matmul", c, (double[]){17, -4, 25, 17, -2, 7, -14, -4}, 8, 0);
        CHECK(c && cn_dtype_of(c) == dts[d]);
        /* b given as the transpose of a [2, 3] tensor: a strided operand */
        double btv[6] = {2, 0, 5, -1, 3, 1};
        cn_tensor *bt = th_own(th_tensor(btv, (int64_t[]){2, 3}, 2, dts[d]));
        th_check_values("int matmul, transposed b", th_own(cn_matmul(a, th_own(cn_transpose(bt, 0, 1)))),
                        (double[]){17, -4, 25, 17, -2, 7, -14, -4}, 8, 0);
    }
    /* i32 wraps: 65536 * 65536 = 2^32 -> 0, plus 3 */
    double w1[2] = {65536, 1}, w2[2] = {65536, 3};
    cn_tensor *x = th_own(th_tensor(w1, (int64_t[]){1, 2}, 2, CN_I32));
    cn_tensor *y = th_own(th_tensor(w2, (int64_t[]){2, 1}, 2, CN_I32));
    th_check_values("i32 matmul wraps", th_own(cn_matmul(x, y)), (double[]){3}, 1, 0);
    th_release_owned();
}

/* cn_linear's one kernel against matmul + add in double: a batch of one (the product split over
 * the columns) and batches of many rows (blocks of rows over the threads, the bias added per
 * block; 2050 rows take the larger blocks, with a ragged last one), x and w contiguous and
 * transposed, with and without the bias. */
static void test_linear_kernel_matches_matmul_and_add(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(11);
    const int64_t rows[4] = {1, 300, 517, 2050};
    for (int r = 0; r < 4; r++)
        for (int layout = 0; layout < 2; layout++) {
            const int64_t xs[2] = {rows[r], 70}, xts[2] = {70, rows[r]};
            const int64_t ws[2] = {50, 70}, wts[2] = {70, 50}, bs[1] = {50};
            cn_tensor *x = layout ? cn_transpose(cn_rand_normal(&gen, xts, 2, 0, 1, CN_F64,
                                                                cn_cpu()), 0, 1)
                                  : cn_rand_normal(&gen, xs, 2, 0, 1, CN_F64, cn_cpu());
            cn_tensor *w = layout ? cn_transpose(cn_rand_normal(&gen, wts, 2, 0, 1, CN_F64,
                                                                cn_cpu()), 0, 1)
                                  : cn_rand_normal(&gen, ws, 2, 0, 1, CN_F64, cn_cpu());
            cn_tensor *b = cn_rand_normal(&gen, bs, 1, 0, 1, CN_F64, cn_cpu());
            cn_tensor *want = cn_matmul(x, cn_transpose(w, 0, 1));
            th_check_close("linear, no bias", cn_linear(x, w, NULL), want, 1e-12);
            th_check_close("linear", cn_linear(x, w, b), cn_add(want, b), 1e-12);
        }
    cn_scope_end();
}

/* cn_linear_gelu against cn_gelu(cn_linear(...)): the same values (the same GEMM blocks, the same
 * gelu), and through autodiff the same gradients of x, w and b (the kernel's saved gelu' against
 * the activation backward's recomputed one), both forms, f32 and f64, with and without the bias,
 * a batch of one and blocks of many rows; under no-grad the output is not tracked; misuse. */
static void test_linear_gelu_matches_linear_then_gelu(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(12);
    cn_device ad = cn_autodiff(cn_cpu());
    const int64_t rows[3] = {1, 300, 2050};
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    for (int t = 0; t < 2; t++)
        for (int form = 0; form < 2; form++)
            for (int r = 0; r < 3; r++)
                for (int nb = 0; nb < 2; nb++) {
                    cn_dtype dt = dts[t];
                    const int64_t xs[3] = {2, rows[r], 40}, ws[2] = {96, 40}, bs[1] = {96};
                    const int64_t ys[3] = {2, rows[r], 96};
                    cn_tensor *x = cn_rand_normal(&gen, xs, 3, 0, 1, dt, cn_cpu());
                    cn_tensor *w = cn_rand_normal(&gen, ws, 2, 0, 0.3, dt, cn_cpu());
                    cn_tensor *b = nb ? cn_rand_normal(&gen, bs, 1, 0, 0.5, dt, cn_cpu()) : NULL;
                    cn_tensor *rr = cn_rand_normal(&gen, ys, 3, 0, 1, dt, cn_cpu());
                    cn_gelu_approx ap = form ? CN_GELU_TANH : CN_GELU_ERF;
                    th_check_close("linear_gelu", cn_linear_gelu(x, w, b, ap),
                                   cn_gelu(cn_linear(x, w, b), ap), 0);
                    cn_tensor *g[2][3] = {{0}};
                    for (int fused = 0; fused < 2; fused++) {
                        cn_tensor *l[3] = {cn_require_grad(cn_from_inner(x, ad)),
                                           cn_require_grad(cn_from_inner(w, ad)),
                                           b ? cn_require_grad(cn_from_inner(b, ad)) : NULL};
                        cn_tensor *y = fused ? cn_linear_gelu(l[0], l[1], l[2], ap)
                                             : cn_gelu(cn_linear(l[0], l[1], l[2]), ap);
                        cn_grads *gr = cn_backward(cn_sum(cn_mul(y, cn_from_inner(rr, ad))));
                        CHECK(gr != NULL);
                        for (int i = 0; gr && i < 2 + nb; i++)
                            g[fused][i] = cn_clone(cn_grad(gr, l[i]));
                        cn_grads_free(gr);
                    }
                    const char *names[3] = {"dx", "dw", "db"};
                    for (int i = 0; i < 2 + nb; i++) th_check_close(names[i], g[1][i], g[0][i], 0);
                }
    /* no-grad: tracked inputs, an untracked output of the same values */
    const int64_t xs[2] = {70, 8}, ws[2] = {5, 8};
    cn_tensor *x = cn_require_grad(cn_from_inner(cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32,
                                                                cn_cpu()), ad));
    cn_tensor *w = cn_require_grad(cn_from_inner(cn_rand_normal(&gen, ws, 2, 0, 1, CN_F32,
                                                                cn_cpu()), ad));
    cn_no_grad_begin();
    cn_tensor *y = cn_linear_gelu(x, w, NULL, CN_GELU_ERF);
    cn_no_grad_end();
    CHECK(y && !cn_requires_grad(y));
    th_check_close("no-grad linear_gelu", y, cn_gelu(cn_linear(x, w, NULL), CN_GELU_ERF), 0);
    /* misuse: nothing computed, the error names the call and the argument */
    CHECK_FAILS(cn_linear_gelu(x, w, NULL, (cn_gelu_approx)7), CN_ERR_INVALID_ARG, "approx");
    CHECK_FAILS(cn_linear_gelu(NULL, w, NULL, CN_GELU_ERF), CN_ERR_NULL_ARG, "linear_gelu");
    CHECK_FAILS(cn_linear_gelu(x, cn_reshape(w, (int64_t[]){40}, 1), NULL, CN_GELU_ERF),
                CN_ERR_SHAPE, "'w'");
    CHECK_FAILS(cn_linear_gelu(x, w, cn_ones((int64_t[]){4}, 1, CN_F32, cn_cpu()), CN_GELU_ERF),
                CN_ERR_SHAPE, "'b'");
    CHECK_FAILS(cn_linear_gelu(x, cn_ones((int64_t[]){5, 7}, 2, CN_F32, cn_cpu()), NULL,
                               CN_GELU_ERF),
                CN_ERR_SHAPE, "matmul");
    cn_scope_end();
}

/* linear_gelu's exact form takes each block of 64 outputs that are all within |x| < 1.2374 (the
 * small branch of its normal CDF) through that branch alone, others through both: a GPT-sized
 * weight (std 0.02: every block small), a bias with one large column (blocks of both kinds), and
 * a row of NaN give the bits of cn_gelu(cn_linear(...)) forward and the same gradients, and match
 * a double-precision gelu of the f32 product. */
static void test_linear_gelu_small_blocks(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(31);
    cn_device ad = cn_autodiff(cn_cpu());
    const int64_t xs[2] = {300, 40}, ws[2] = {96, 40}, bs[1] = {96};
    float xv[300 * 40], bv[96] = {0};
    CHECK(cn_read(cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32, cn_cpu()), xv, sizeof xv) == CN_OK);
    cn_tensor *w = cn_rand_normal(&gen, ws, 2, 0, 0.02, CN_F32, cn_cpu());
    for (int c = 0; c < 3; c++) {
        if (c >= 1) bv[7] = 5.0f; /* column 7 out of range: 2 blocks of every 3 mixed */
        if (c == 2)
            for (int k = 0; k < 40; k++) xv[5 * 40 + k] = NAN; /* row 5 of y NaN */
        cn_tensor *x = cn_from_data(xv, xs, 2, CN_F32, cn_cpu());
        cn_tensor *b = cn_from_data(bv, bs, 1, CN_F32, cn_cpu());
        cn_tensor *lin = cn_linear(x, w, b), *got = cn_linear_gelu(x, w, b, CN_GELU_ERF);
        cn_tensor *want = cn_gelu(lin, CN_GELU_ERF);
        float l[300 * 96], g[300 * 96], wv[300 * 96];
        CHECK(cn_read(lin, l, sizeof l) == CN_OK && cn_read(got, g, sizeof g) == CN_OK &&
              cn_read(want, wv, sizeof wv) == CN_OK);
        int bad = 0, large = 0;
        for (int i = 0; i < 300 * 96; i++) {
            large += fabsf(l[i]) >= 1.2374f;
            int nan_row = c == 2 && i / 96 == 5;
            double ref = 0.5 * (double)l[i] * erfc(-(double)l[i] / sqrt(2.0));
            double tol = 2e-7 * (fabs(ref) > 1 ? fabs(ref) : 1);
            if (nan_row ? !(isnan(g[i]) && isnan(wv[i]))
                        : memcmp(&g[i], &wv[i], sizeof g[i]) != 0 || !(fabs(g[i] - ref) <= tol)) {
                if (bad++ < 3)
                    fprintf(stderr, "case %d: gelu(%.9g) = %.9g, unfused %.9g, f64 %.17g\n", c,
                            l[i], g[i], wv[i], ref);
            }
        }
        CHECK(bad == 0);
        CHECK(c == 0 ? large == 0 : large >= 299); /* the premise: column 7 but in row 5 */
        if (c == 2) continue;
        cn_tensor *grads[2][3] = {{0}};
        for (int fused = 0; fused < 2; fused++) {
            cn_tensor *in[3] = {cn_require_grad(cn_from_inner(x, ad)),
                                cn_require_grad(cn_from_inner(w, ad)),
                                cn_require_grad(cn_from_inner(b, ad))};
            cn_tensor *y = fused ? cn_linear_gelu(in[0], in[1], in[2], CN_GELU_ERF)
                                 : cn_gelu(cn_linear(in[0], in[1], in[2]), CN_GELU_ERF);
            cn_grads *gr = cn_backward(cn_sum(cn_mul(y, cn_from_inner(lin, ad))));
            CHECK(gr != NULL);
            for (int i = 0; gr && i < 3; i++) grads[fused][i] = cn_clone(cn_grad(gr, in[i]));
            cn_grads_free(gr);
        }
        const char *names[3] = {"dx", "dw", "db"};
        for (int i = 0; i < 3; i++) th_check_close(names[i], grads[1][i], grads[0][i], 0);
    }
    cn_scope_end();
}

/* f32 linear's bias (added to each block of rows by a vectorised loop): a dense bias and a strided
 * one (every other element of a longer vector), blocks of many rows and a batch of one, against
 * the product and the sum in f64 of the same f32 values. */
static void test_linear_f32_bias_dense_and_strided(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(13);
    const int64_t rows[2] = {1, 1030};
    for (int r = 0; r < 2; r++)
        for (int strided = 0; strided < 2; strided++) {
            const int64_t xs[2] = {rows[r], 70}, ws[2] = {50, 70}, bs[1] = {100};
            cn_tensor *x = cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32, cn_cpu());
            cn_tensor *w = cn_rand_normal(&gen, ws, 2, 0, 1, CN_F32, cn_cpu());
            cn_tensor *bb = cn_rand_normal(&gen, bs, 1, 0, 1, CN_F32, cn_cpu());
            cn_tensor *b = strided ? cn_slice(bb, 0, 0, 100, 2) : cn_slice(bb, 0, 0, 50, 1);
            cn_tensor *want = cn_add(cn_matmul(cn_cast(x, CN_F64),
                                               cn_transpose(cn_cast(w, CN_F64), 0, 1)),
                                     cn_cast(b, CN_F64));
            th_check_close("f32 linear with bias", cn_linear(x, w, b), want, 1e-5);
        }
    cn_scope_end();
}

int main(void) {
    RUN(test_2d_matches_reference);
    RUN(test_batched_with_broadcast_batch_dims);
    RUN(test_one_dim_operands_promote_like_numpy);
    RUN(test_transposed_and_sliced_inputs);
    RUN(test_empty_dims);
    RUN(test_linear_with_and_without_bias);
    RUN(test_router_rejects_bad_operands);
    RUN(test_kernel_rejects_inconsistent_views);
    RUN(test_cpu_gemm_for_extensions);
    RUN(test_integer_matmul);
    RUN(test_linear_kernel_matches_matmul_and_add);
    RUN(test_linear_gelu_matches_linear_then_gelu);
    RUN(test_linear_gelu_small_blocks);
    RUN(test_linear_f32_bias_dense_and_strided);
    return th_finish();
}
