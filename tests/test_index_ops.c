/* The indexing ops of issue 16 through the public API, beyond the op table's PyTorch cases
 * (tests/test_op_table.c): what PyTorch leaves undefined and cinder defines (scatter and
 * index_copy with repeated index values keep the last write, and their gradients go to the
 * winning entries only), edge shapes (0-d, empty, strided and broadcast inputs, diagonals past
 * the matrix), and every misuse: a clear status and message naming the call and the argument,
 * the inputs untouched and nothing leaked. Expected values are worked out by hand in the
 * comments beside them. */
#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* Every test runs in a scope, which releases its inputs and results at its end. */
static cn_tensor *f64(const double *v, const int64_t *shape, int nd) {
    return th_tensor(v, shape, nd, CN_F64);
}

static cn_tensor *i64(const double *v, const int64_t *shape, int nd) {
    return th_tensor(v, shape, nd, CN_I64);
}

static cn_tensor *bools(const double *v, const int64_t *shape, int nd) {
    return th_tensor(v, shape, nd, CN_BOOL);
}

/* A leaf on the autodiff CPU holding v. */
static cn_tensor *leaf(const double *v, const int64_t *shape, int nd) {
    return cn_require_grad(cn_from_inner(th_tensor(v, shape, nd, CN_F64), cn_autodiff(cn_cpu())));
}

/* ---- repeated indices: the last write wins ------------------------------------------------- */

/* x = [10, 20, 30], index = [1, 1, 0], src = [1, 2, 3]: position 1 is written by src[0] then
 * src[1], so it keeps 2; position 0 gets 3: out = [3, 2, 30]. With L = sum(out * [1, 2, 4]):
 * dL/dx = [0, 0, 4] (positions 0 and 1 are overwritten), dL/dsrc = [0, 2, 1] (src[0] lost). */
static void test_scatter_repeated_index_keeps_the_last_write(void) {
    cn_scope_begin();
    const int64_t s3[1] = {3};
    const double xv[3] = {10, 20, 30}, iv[3] = {1, 1, 0}, sv[3] = {1, 2, 3}, rv[3] = {1, 2, 4};
    const double want[3] = {3, 2, 30}, want_dx[3] = {0, 0, 4}, want_ds[3] = {0, 2, 1};
    th_check_values("scatter repeated",
                    cn_scatter(f64(xv, s3, 1), 0, i64(iv, s3, 1), f64(sv, s3, 1)), want, 3, 0);
    cn_tensor *x = leaf(xv, s3, 1), *src = leaf(sv, s3, 1);
    cn_tensor *idx = cn_from_inner(i64(iv, s3, 1), cn_autodiff(cn_cpu()));
    cn_tensor *r = cn_from_inner(f64(rv, s3, 1), cn_autodiff(cn_cpu()));
    cn_grads *g = cn_backward(cn_sum(cn_mul(cn_scatter(x, 0, idx, src), r)));
    CHECK(g != NULL);
    if (g) {
        th_check_values("scatter dL/dx", cn_grad(g, x), want_dx, 3, 0);
        th_check_values("scatter dL/dsrc", cn_grad(g, src), want_ds, 3, 0);
    }
    cn_grads_free(g);
    cn_scope_end();
}

/* x [3, 2] = [[1, 2], [3, 4], [5, 6]], index = [2, 0, 2], src = [[7, 8], [9, 10], [11, 12]]:
 * row 2 gets src row 0 then row 2 (kept), row 0 gets src row 1: out = [[9, 10], [3, 4],
 * [11, 12]]. With L = sum(out * R), R = [[1, 2], [3, 4], [5, 6]]: dL/dx = [[0, 0], [3, 4],
 * [0, 0]], dL/dsrc = [[0, 0], [1, 2], [5, 6]]. */
static void test_index_copy_repeated_index_keeps_the_last_slice(void) {
    cn_scope_begin();
    const int64_t s32[2] = {3, 2}, s3[1] = {3};
    const double xv[6] = {1, 2, 3, 4, 5, 6}, iv[3] = {2, 0, 2}, sv[6] = {7, 8, 9, 10, 11, 12};
    const double want[6] = {9, 10, 3, 4, 11, 12}, want_dx[6] = {0, 0, 3, 4, 0, 0};
    const double want_ds[6] = {0, 0, 1, 2, 5, 6};
    th_check_values("index_copy repeated",
                    cn_index_copy(f64(xv, s32, 2), 0, i64(iv, s3, 1), f64(sv, s32, 2)), want, 6, 0);
    cn_tensor *x = leaf(xv, s32, 2), *src = leaf(sv, s32, 2);
    cn_tensor *idx = cn_from_inner(i64(iv, s3, 1), cn_autodiff(cn_cpu()));
    cn_tensor *r = cn_from_inner(f64(xv, s32, 2), cn_autodiff(cn_cpu()));
    cn_grads *g = cn_backward(cn_sum(cn_mul(cn_index_copy(x, 0, idx, src), r)));
    CHECK(g != NULL);
    if (g) {
        th_check_values("index_copy dL/dx", cn_grad(g, x), want_dx, 6, 0);
        th_check_values("index_copy dL/dsrc", cn_grad(g, src), want_ds, 6, 0);
    }
    cn_grads_free(g);
    cn_scope_end();
}

/* index_add sums repeated slices in index order: x = [1, 2], index = [1, 1, 0], src = [3, 4, 5]
 * -> [1 + 5, 2 + 3 + 4] = [6, 9]. */
static void test_index_add_repeated_index_sums(void) {
    cn_scope_begin();
    const int64_t s2[1] = {2}, s3[1] = {3};
    const double xv[2] = {1, 2}, iv[3] = {1, 1, 0}, sv[3] = {3, 4, 5}, want[2] = {6, 9};
    th_check_values("index_add repeated",
                    cn_index_add(f64(xv, s2, 1), 0, i64(iv, s3, 1), f64(sv, s3, 1)), want, 2, 0);
    cn_scope_end();
}

/* scatter_nd: x = [[1, 2], [3, 4]], tuples [[1], [0], [1]] (rows), updates [[5, 6], [7, 8],
 * [9, 10]]. assign: row 1 keeps the last, [[7, 8], [9, 10]]; add: [[8, 10], [17, 20]].
 * max with x = [[1, 2], [3, 4]], tuples [[0, 0], [0, 0]], updates [1, 0]: entry (0, 0) is
 * max(1, 1, 0) = 1, a tie between x and the first update: with L = sum(out), each gets 1/2. */
static void test_scatter_nd_reductions(void) {
    cn_scope_begin();
    const int64_t s22[2] = {2, 2}, s31[2] = {3, 1}, s32[2] = {3, 2}, s2[1] = {2};
    const double xv[4] = {1, 2, 3, 4}, tv[3] = {1, 0, 1}, uv[6] = {5, 6, 7, 8, 9, 10};
    const double assign[4] = {7, 8, 9, 10}, add[4] = {8, 10, 17, 20};
    cn_tensor *x = f64(xv, s22, 2), *t = i64(tv, s31, 2), *u = f64(uv, s32, 2);
    th_check_values("scatter_nd assign", cn_scatter_nd(x, t, u, CN_SCATTER_ASSIGN), assign, 4, 0);
    th_check_values("scatter_nd add", cn_scatter_nd(x, t, u, CN_SCATTER_ADD), add, 4, 0);
    const double t00[4] = {0, 0, 0, 0}, u10[2] = {1, 0};
    const double want_dx[4] = {0.5, 1, 1, 1}, want_du[2] = {0.5, 0};
    cn_tensor *xl = leaf(xv, s22, 2), *ul = leaf(u10, s2, 1);
    cn_tensor *tl = cn_from_inner(i64(t00, s22, 2), cn_autodiff(cn_cpu()));
    cn_grads *g = cn_backward(cn_sum(cn_scatter_nd(xl, tl, ul, CN_SCATTER_MAX)));
    CHECK(g != NULL);
    if (g) {
        th_check_values("scatter_nd max tie dL/dx", cn_grad(g, xl), want_dx, 4, 0);
        th_check_values("scatter_nd max tie dL/du", cn_grad(g, ul), want_du, 2, 0);
    }
    cn_grads_free(g);
    cn_scope_end();
}

/* ---- edge shapes ---------------------------------------------------------------------------- */

/* A mask of one element broadcasts to all of x; a 0-d x takes a 0-d mask. */
static void test_masked_fill_scalar_mask_and_scalar_x(void) {
    cn_scope_begin();
    const int64_t s23[2] = {2, 3};
    const double xv[6] = {1, 2, 3, 4, 5, 6}, t[1] = {1}, all[6] = {-1, -1, -1, -1, -1, -1};
    th_check_values("masked_fill 0-d mask", cn_masked_fill(f64(xv, s23, 2), bools(t, NULL, 0), -1),
                    all, 6, 0);
    const double seven[1] = {7};
    th_check_values("masked_fill 0-d x", cn_masked_fill(f64(xv, NULL, 0), bools(t, NULL, 0), 7),
                    seven, 1, 0);
    /* an i32 x takes the value truncated toward zero */
    cn_tensor *xi = (cn_cast(f64(xv, s23, 2), CN_I32));
    const double mv[3] = {0, 1, 0}, want[6] = {1, -2, 3, 4, -2, 6};
    const int64_t s3[1] = {3};
    th_check_values("masked_fill i32", cn_masked_fill(xi, bools(mv, s3, 1), -2.75), want, 6, 0);
    cn_scope_end();
}

/* x = [[1, 2, 3], [4, 5, 6]]: diagonals past the matrix keep all (tril 5, triu -5) or nothing
 * (tril -5, triu 5); tril 1 drops only entry (0, 2). */
static void test_triangles_past_the_matrix(void) {
    cn_scope_begin();
    const int64_t s23[2] = {2, 3};
    const double xv[6] = {1, 2, 3, 4, 5, 6}, zero[6] = {0};
    const double tril1[6] = {1, 2, 0, 4, 5, 6};
    cn_tensor *x = f64(xv, s23, 2);
    th_check_values("tril 5", cn_tril(x, 5), xv, 6, 0);
    th_check_values("triu -5", cn_triu(x, -5), xv, 6, 0);
    th_check_values("tril -5", cn_tril(x, -5), zero, 6, 0);
    th_check_values("triu 5", cn_triu(x, 5), zero, 6, 0);
    th_check_values("tril 1", cn_tril(x, 1), tril1, 6, 0);
    /* on a transposed view: x^T = [[1, 4], [2, 5], [3, 6]], triu 0 = [[1, 4], [0, 5], [0, 0]] */
    const double triu_t[6] = {1, 4, 0, 5, 0, 0};
    th_check_values("triu of a transposed view", cn_triu((cn_transpose(x, 0, 1)), 0), triu_t, 6, 0);
    cn_scope_end();
}

/* flip of no dims is a copy; flip of a strided view reads through its strides; repeat of a 0-d
 * tensor tiles its one value; a repeat of 0 gives an empty dim. */
static void test_flip_and_repeat_edges(void) {
    cn_scope_begin();
    const int64_t s23[2] = {2, 3};
    const double xv[6] = {1, 2, 3, 4, 5, 6};
    cn_tensor *x = f64(xv, s23, 2);
    th_check_values("flip of no dims", cn_flip(x, NULL, 0), xv, 6, 0);
    /* x[:, ::2] = [[1, 3], [4, 6]], flipped along both dims: [[6, 4], [3, 1]] */
    const int dims[2] = {-1, 0};
    const double want_flip[4] = {6, 4, 3, 1};
    th_check_values("flip of a strided view", cn_flip((cn_slice(x, 1, 0, 3, 2)), dims, 2),
                    want_flip, 4, 0);
    const double five[1] = {5}, fives[6] = {5, 5, 5, 5, 5, 5};
    const int64_t r23[2] = {2, 3};
    cn_tensor *r = (cn_repeat(f64(five, NULL, 0), r23, 2));
    th_check_shape("repeat of 0-d", r, s23, 2);
    th_check_values("repeat of 0-d", r, fives, 6, 0);
    const int64_t r10[2] = {1, 0}, s20[2] = {2, 0};
    th_check_shape("repeat 0", (cn_repeat(x, r10, 2)), s20, 2);
    /* a broadcast input: [1, 2, 3] expanded to [2, 3], repeated (1, 2) -> rows 1 2 3 1 2 3 */
    const int64_t s3[1] = {3}, r12[2] = {1, 2};
    const double want_rep[12] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3};
    cn_tensor *e = (cn_expand(f64(xv, s3, 1), s23, 2));
    th_check_values("repeat of a broadcast view", cn_repeat(e, r12, 2), want_rep, 12, 0);
    cn_scope_end();
}

/* slice_assign with bounds as cn_slice takes them: x = [0, 1, 2, 3, 4, 5], [-5:100:2] is
 * positions 1, 3, 5. */
static void test_slice_assign_bounds(void) {
    cn_scope_begin();
    const int64_t s6[1] = {6}, s3[1] = {3}, s0[1] = {0};
    const double xv[6] = {0, 1, 2, 3, 4, 5}, vv[3] = {-1, -3, -5};
    const double want[6] = {0, -1, 2, -3, 4, -5};
    cn_tensor *x = f64(xv, s6, 1);
    th_check_values("slice_assign -5:100:2", cn_slice_assign(x, f64(vv, s3, 1), 0, -5, 100, 2),
                    want, 6, 0);
    /* an empty slice takes empty values and gives x back */
    th_check_values("slice_assign empty", cn_slice_assign(x, f64(vv, s0, 1), 0, 4, 2, 1), xv, 6, 0);
    cn_scope_end();
}

/* Data-dependent shapes at their edges: nothing selected, a 0-d input, windows of size 0. */
static void test_empty_results(void) {
    cn_scope_begin();
    const int64_t s23[2] = {2, 3}, none2[2] = {0, 2}, none1[1] = {0}, one0[2] = {1, 0};
    const double xv[6] = {1, 2, 3, 4, 5, 6}, zeros[6] = {0}, five[1] = {5};
    cn_tensor *x = f64(xv, s23, 2);
    th_check_shape("nonzero of zeros", cn_nonzero(f64(zeros, s23, 2)), none2, 2);
    th_check_shape("masked_select of none", cn_masked_select(x, bools(zeros, s23, 2)), none1, 1);
    /* a 0-d nonzero input has one coordinate-less row, as torch.nonzero gives */
    th_check_shape("nonzero of 0-d", cn_nonzero(f64(five, NULL, 0)), one0, 2);
    /* size 0: 4 empty windows along dim 1 */
    const int64_t w0[3] = {2, 4, 0};
    th_check_shape("unfold size 0", cn_unfold(x, 1, 0, 1), w0, 3);
    /* -0.0 is zero, NaN is not: torch.nonzero([-0.0, nan, 0.0, 1.0]) = [[1], [3]] */
    const double odd[4] = {-0.0, NAN, 0.0, 1.0}, want[2] = {1, 3};
    const int64_t s4[1] = {4};
    th_check_values("nonzero of -0.0 and NaN", cn_nonzero(f64(odd, s4, 1)), want, 2, 0);
    cn_scope_end();
}

/* ---- misuse: the status, the call and argument named, nothing leaked --------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t s23[2] = {2, 3}, s3[1] = {3}, s4[1] = {4}, s2[1] = {2}, s13[2] = {1, 3};
    const int64_t s223[3] = {2, 2, 3}, s22[2] = {2, 2};
    const double xv[6] = {1, 2, 3, 4, 5, 6}, mv[12] = {0, 1, 0, 1, 0, 1};
    const double out_of_range[3] = {0, 2, 1}, negative[3] = {0, -1, 1}, iv[3] = {0, 1, 1};
    const double i2[2] = {0, 3};
    /* every input made first, so that the count of live tensors shows any the calls leak */
    cn_tensor *x = f64(xv, s23, 2), *xb = cn_cast(x, CN_BOOL), *xi = cn_cast(x, CN_I32);
    cn_tensor *x1 = f64(xv, s3, 1), *m4 = bools(mv, s4, 1), *m23 = bools(mv, s23, 2);
    cn_tensor *m223 = bools(mv, s223, 3), *src = f64(xv, s13, 2), *src32 = cn_cast(src, CN_F32);
    cn_tensor *idx_far = i64(out_of_range, s13, 2), *idx_neg = i64(negative, s13, 2);
    cn_tensor *idx_f = f64(iv, s13, 2), *idx = i64(iv, s13, 2), *idx32 = cn_cast(idx, CN_I32);
    cn_tensor *idx1 = i64(iv, s3, 1), *i2t = i64(i2, s2, 1), *x4 = f64(xv, s4, 1);
    cn_tensor *i23 = i64(xv, s23, 2), *x22 = f64(xv, s22, 2), *b22 = bools(mv, s22, 2);
    cn_tensor *x0 = f64(xv, NULL, 0);
    const double tuples_far[4] = {1, 2, 0, 3}, tuples_ok[2] = {1, 0};
    const int64_t s21[2] = {2, 1};
    cn_tensor *tuple_far = i64(tuples_far, s22, 2), *tuple_ok = i64(tuples_ok, s21, 2);
    cn_tensor *x2 = f64(xv, s2, 1);
    int64_t live = cn_live_tensors();

    /* masked_fill: the mask's kind and shape, an int value out of range */
    CHECK_FAILS(cn_masked_fill(x, x, 0), CN_ERR_KIND, "'mask'");
    CHECK_FAILS(cn_masked_fill(x, m4, 0), CN_ERR_SHAPE, "do not broadcast");
    CHECK_FAILS(cn_masked_fill(x, m223, 0), CN_ERR_SHAPE, "does not broadcast to 'x'");
    CHECK_FAILS(cn_masked_fill(xi, m23, 1e12), CN_ERR_INVALID_ARG, "value");
    CHECK_FAILS(cn_masked_fill(NULL, xb, 0), CN_ERR_NULL_ARG, "x");

    /* tril / triu */
    CHECK_FAILS(cn_tril(x1, 0), CN_ERR_SHAPE, "fewer than 2 dims");
    CHECK_FAILS(cn_triu(NULL, 0), CN_ERR_NULL_ARG, "triu");

    /* flip */
    const int bad_dim[1] = {2}, twice[2] = {1, -1}, three[3] = {0, 1, 0};
    CHECK_FAILS(cn_flip(x, bad_dim, 1), CN_ERR_INVALID_ARG, "dims = 2 is out of range");
    CHECK_FAILS(cn_flip(x, twice, 2), CN_ERR_INVALID_ARG, "appears twice");
    CHECK_FAILS(cn_flip(x, three, 3), CN_ERR_INVALID_ARG, "n = 3");
    CHECK_FAILS(cn_flip(x, NULL, 1), CN_ERR_NULL_ARG, "dims");

    /* repeat */
    const int64_t one[1] = {2}, neg[2] = {1, -1}, huge[2] = {1, INT64_MAX / 2};
    CHECK_FAILS(cn_repeat(x, one, 1), CN_ERR_SHAPE, "1 repeats");
    CHECK_FAILS(cn_repeat(x, neg, 2), CN_ERR_INVALID_ARG, "repeats[1] = -1");
    CHECK_FAILS(cn_repeat(x, huge, 2), CN_ERR_OVERFLOW, "repeats[1]");

    /* scatter: index values, dtype and shape; src; dims */
    CHECK_FAILS(cn_scatter(x, 0, idx_far, src), CN_ERR_INDEX,
                "index value 2 at position [0, 1] is out of range for dim 0 of size 2");
    CHECK_FAILS(cn_scatter(x, 0, idx_neg, src), CN_ERR_INDEX, "negative values are not wrapped");
    CHECK_FAILS(cn_scatter(x, 0, idx_f, src), CN_ERR_KIND, "'index'");
    CHECK_FAILS(cn_scatter(x, 0, idx32, src), CN_ERR_DTYPE, "cn_cast(index, CN_I64)");
    CHECK_FAILS(cn_scatter(x, 0, idx, src32), CN_ERR_DTYPE, "src");
    CHECK_FAILS(cn_scatter(x, 0, idx1, x1), CN_ERR_SHAPE, "does not fit");
    CHECK_FAILS(cn_scatter(x, 0, idx, x), CN_ERR_SHAPE, "differ in shape");
    CHECK_FAILS(cn_scatter(x, 2, idx, src), CN_ERR_INVALID_ARG, "dim = 2");

    /* slice_assign: values of another shape or dtype, a zero step, a bad dim */
    CHECK_FAILS(cn_slice_assign(x, x, 1, 0, 2, 1), CN_ERR_SHAPE, "slice's shape");
    CHECK_FAILS(cn_slice_assign(x, x, 1, 0, 3, 0), CN_ERR_INVALID_ARG, "step = 0");
    CHECK_FAILS(cn_slice_assign(x, xb, 1, 0, 3, 1), CN_ERR_DTYPE, "values");
    CHECK_FAILS(cn_slice_assign(x, x, -3, 0, 3, 1), CN_ERR_INVALID_ARG, "dim = -3");

    /* index_copy / index_add: src's shape, a 2-D index, values out of range, a bool x */
    CHECK_FAILS(cn_index_copy(x, 1, i2t, x4), CN_ERR_SHAPE, "len(index) at dim 1");
    CHECK_FAILS(cn_index_copy(x, 1, i23, x), CN_ERR_SHAPE, "must be 1-D");
    CHECK_FAILS(cn_index_copy(x, 1, i2t, x22), CN_ERR_INDEX,
                "index value 3 at position [1] is out of range for dim 1 of size 3");
    CHECK_FAILS(cn_index_add(x, 1, i2t, x22), CN_ERR_INDEX, "index value 3");
    CHECK_FAILS(cn_index_add(xb, 1, i2t, b22), CN_ERR_KIND, "'x'");

    /* unfold: dims, a window that does not fit, a zero step */
    CHECK_FAILS(cn_unfold(x0, 0, 1, 1), CN_ERR_SHAPE, "1 to 7 dims");
    CHECK_FAILS(cn_unfold(x, 1, 4, 1), CN_ERR_INVALID_ARG, "size = 4");
    CHECK_FAILS(cn_unfold(x, 1, -1, 1), CN_ERR_INVALID_ARG, "size = -1");
    CHECK_FAILS(cn_unfold(x, 1, 2, 0), CN_ERR_INVALID_ARG, "step = 0");
    CHECK_FAILS(cn_unfold(x, 2, 1, 1), CN_ERR_INVALID_ARG, "dim = 2");

    /* masked_select: the mask's kind and shape; nonzero of nothing */
    CHECK_FAILS(cn_masked_select(x, x), CN_ERR_KIND, "'mask'");
    CHECK_FAILS(cn_masked_select(x, m4), CN_ERR_SHAPE, "do not broadcast");
    CHECK_FAILS(cn_nonzero(NULL), CN_ERR_NULL_ARG, "nonzero");

    /* gather_nd / scatter_nd: tuple length, tuple values, updates' shape, the reduction */
    CHECK_FAILS(cn_gather_nd(x, i23), CN_ERR_SHAPE, "1 <= K <= 2");
    CHECK_FAILS(cn_gather_nd(x, idx_far), CN_ERR_SHAPE, "1 <= K <= 2");
    CHECK_FAILS(cn_gather_nd(x, tuple_far), CN_ERR_INDEX,
                "index value 3 at position [1, 1] is out of range for dim 1 of size 3");
    CHECK_FAILS(cn_gather_nd(x, idx32), CN_ERR_DTYPE, "cn_cast(index, CN_I64)");
    CHECK_FAILS(cn_scatter_nd(x, tuple_ok, x4, CN_SCATTER_ADD), CN_ERR_SHAPE, "'updates'");
    CHECK_FAILS(cn_scatter_nd(x, tuple_ok, x22, (cn_scatter_reduce)7), CN_ERR_INVALID_ARG,
                "reduce = 7");
    CHECK_FAILS(cn_scatter_nd(xb, tuple_ok, b22, CN_SCATTER_MAX), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_scatter_nd(x, tuple_far, x2, CN_SCATTER_ASSIGN), CN_ERR_INDEX, "index value 3");

    /* nothing leaked, x untouched */
    CHECK(cn_live_tensors() == live);
    th_check_values("x after the misuse", x, xv, 6, 0);
    cn_scope_end();
}

/* ---- the whole flow on the autodiff device: a causal mask as attention builds it ---------- */

/* scores [3, 3] with everything above the diagonal masked to -1e9 (triu(ones, 1) as the mask),
 * then the gradient of sum(masked * R) is R below and on the diagonal, 0 above. */
static void test_causal_mask_gradient(void) {
    cn_scope_begin();
    const int64_t s33[2] = {3, 3};
    const double sv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const double want[9] = {1, 0, 0, 4, 5, 0, 7, 8, 9};
    cn_tensor *s = leaf(sv, s33, 2);
    cn_tensor *mask = cn_cast(cn_triu(th_tensor(ones, s33, 2, CN_F64), 1), CN_BOOL);
    mask = cn_from_inner(mask, cn_autodiff(cn_cpu()));
    cn_tensor *r = cn_from_inner(th_tensor(sv, s33, 2, CN_F64), cn_autodiff(cn_cpu()));
    cn_grads *g = cn_backward(cn_sum(cn_mul(cn_masked_fill(s, mask, -1e9), r)));
    CHECK(g != NULL);
    if (g) th_check_values("causal mask dL/ds", cn_grad(g, s), want, 9, 0);
    cn_grads_free(g);
    cn_scope_end();
}

int main(void) {
    RUN(test_scatter_repeated_index_keeps_the_last_write);
    RUN(test_index_copy_repeated_index_keeps_the_last_slice);
    RUN(test_index_add_repeated_index_sums);
    RUN(test_scatter_nd_reductions);
    RUN(test_masked_fill_scalar_mask_and_scalar_x);
    RUN(test_triangles_past_the_matrix);
    RUN(test_flip_and_repeat_edges);
    RUN(test_slice_assign_bounds);
    RUN(test_empty_results);
    RUN(test_misuse);
    RUN(test_causal_mask_gradient);
    return th_finish();
}
