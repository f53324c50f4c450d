/* cn_linear_add (y = x w^T + b + r in one op, CN_OP_LINEAR_ADD) against cn_add(r, cn_linear(x,
 * w, b)): the same values bit for bit (the same GEMM blocks, then the bias, then r), and through
 * autodiff the same gradients of x, w, b and r; r contiguous, transposed (a column stride) and
 * sliced; f32 and f64; a batch of one row and blocks of many rows; under no-grad the output is
 * untracked; misuse. PyTorch's values are checked by the op table's cases (test_op_table). */
#include "harness.h"

/* r of shape ys (3-D) in layout l: 0 contiguous, 1 a transposed view (unit stride along dim 1),
 * 2 a slice of a wider tensor (row stride past the row) */
static cn_tensor *residual(cn_generator *gen, const int64_t *ys, int l, cn_dtype dt) {
    if (l == 0) return cn_rand_normal(gen, ys, 3, 0, 1, dt, cn_cpu());
    if (l == 1) {
        const int64_t ts[3] = {ys[0], ys[2], ys[1]};
        return cn_transpose(cn_rand_normal(gen, ts, 3, 0, 1, dt, cn_cpu()), 1, 2);
    }
    const int64_t wide[3] = {ys[0], ys[1], ys[2] + 7};
    return cn_slice(cn_rand_normal(gen, wide, 3, 0, 1, dt, cn_cpu()), 2, 3, 3 + ys[2], 1);
}

static void test_matches_linear_then_add(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(21);
    cn_device ad = cn_autodiff(cn_cpu());
    const int64_t rows[3] = {1, 300, 2050};
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 3; r++)
            for (int l = 0; l < 3; l++)
                for (int nb = 0; nb < 2; nb++) {
                    cn_dtype dt = dts[t];
                    const int64_t xs[3] = {2, rows[r], 40}, ws[2] = {96, 40}, bs[1] = {96};
                    const int64_t ys[3] = {2, rows[r], 96};
                    cn_tensor *x = cn_rand_normal(&gen, xs, 3, 0, 1, dt, cn_cpu());
                    cn_tensor *w = cn_rand_normal(&gen, ws, 2, 0, 0.3, dt, cn_cpu());
                    cn_tensor *b = nb ? cn_rand_normal(&gen, bs, 1, 0, 0.5, dt, cn_cpu()) : NULL;
                    cn_tensor *res = residual(&gen, ys, l, dt);
                    cn_tensor *up = cn_rand_normal(&gen, ys, 3, 0, 1, dt, cn_cpu());
                    th_check_close("linear_add", cn_linear_add(x, w, b, res),
                                   cn_add(res, cn_linear(x, w, b)), 0);
                    cn_tensor *g[2][4] = {{0}};
                    for (int fused = 0; fused < 2; fused++) {
                        cn_tensor *v[4] = {cn_require_grad(cn_from_inner(x, ad)),
                                           cn_require_grad(cn_from_inner(w, ad)),
                                           cn_require_grad(cn_from_inner(res, ad)),
                                           b ? cn_require_grad(cn_from_inner(b, ad)) : NULL};
                        cn_tensor *y = fused ? cn_linear_add(v[0], v[1], v[3], v[2])
                                             : cn_add(v[2], cn_linear(v[0], v[1], v[3]));
                        CHECK(y && cn_requires_grad(y));
                        cn_grads *gr = cn_backward(cn_sum(cn_mul(y, cn_from_inner(up, ad))));
                        CHECK(gr != NULL);
                        for (int i = 0; gr && i < 3 + nb; i++)
                            g[fused][i] = cn_clone(cn_grad(gr, v[i]));
                        cn_grads_free(gr);
                    }
                    const char *names[4] = {"dx", "dw", "dr", "db"};
                    for (int i = 0; i < 3 + nb; i++)
                        th_check_close(names[i], g[1][i], g[0][i], 0);
                }
    cn_scope_end();
}

/* x w^T + b + r of small integers, worked by hand: [[1, 2], [3, 4]] w [[1, 0], [1, 1], [0, 2]]
 * b [10, 20, 30] r [[1, 1, 1], [2, 2, 2]] */
static void test_hand_computed(void) {
    cn_scope_begin();
    const float xv[4] = {1, 2, 3, 4}, wv[6] = {1, 0, 1, 1, 0, 2}, bv[3] = {10, 20, 30};
    const float rv[6] = {1, 1, 1, 2, 2, 2};
    const float want[6] = {1 + 10 + 1, 3 + 20 + 1, 4 + 30 + 1, 3 + 10 + 2, 7 + 20 + 2, 8 + 30 + 2};
    cn_tensor *y = cn_linear_add(cn_from_data(xv, (int64_t[]){2, 2}, 2, CN_F32, cn_cpu()),
                                 cn_from_data(wv, (int64_t[]){3, 2}, 2, CN_F32, cn_cpu()),
                                 cn_from_data(bv, (int64_t[]){3}, 1, CN_F32, cn_cpu()),
                                 cn_from_data(rv, (int64_t[]){2, 3}, 2, CN_F32, cn_cpu()));
    float got[6] = {0};
    CHECK(y && cn_read(y, got, sizeof got) == CN_OK);
    for (int i = 0; i < 6; i++)
        CHECK(got[i] == want[i]);
    cn_scope_end();
}

static void test_no_grad_and_misuse(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(22);
    cn_device ad = cn_autodiff(cn_cpu());
    const int64_t xs[2] = {70, 8}, ws[2] = {5, 8}, ys[2] = {70, 5};
    cn_tensor *x =
        cn_require_grad(cn_from_inner(cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32, cn_cpu()), ad));
    cn_tensor *w =
        cn_require_grad(cn_from_inner(cn_rand_normal(&gen, ws, 2, 0, 1, CN_F32, cn_cpu()), ad));
    cn_tensor *r = cn_from_inner(cn_rand_normal(&gen, ys, 2, 0, 1, CN_F32, cn_cpu()), ad);
    cn_no_grad_begin();
    cn_tensor *y = cn_linear_add(x, w, NULL, r);
    cn_no_grad_end();
    CHECK(y && !cn_requires_grad(y));
    th_check_close("no-grad linear_add", y, cn_add(r, cn_linear(x, w, NULL)), 0);
    /* misuse: nothing computed, the error names the call and the argument */
    CHECK_FAILS(cn_linear_add(x, w, NULL, NULL), CN_ERR_NULL_ARG, "'r'");
    CHECK_FAILS(cn_linear_add(NULL, w, NULL, r), CN_ERR_NULL_ARG, "linear_add");
    CHECK_FAILS(cn_linear_add(x, cn_reshape(w, (int64_t[]){40}, 1), NULL, r), CN_ERR_SHAPE, "'w'");
    CHECK_FAILS(cn_linear_add(x, w, cn_ones((int64_t[]){4}, 1, CN_F32, cn_cpu()), r), CN_ERR_SHAPE,
                "'b'");
    CHECK_FAILS(cn_linear_add(x, w, NULL, cn_ones((int64_t[]){70, 4}, 2, CN_F32, cn_cpu())),
                CN_ERR_SHAPE, "'r'");
    CHECK_FAILS(cn_linear_add(x, w, NULL, cn_ones((int64_t[]){5}, 1, CN_F32, cn_cpu())),
                CN_ERR_SHAPE, "'r'");
    cn_tensor *r64 = cn_from_inner(cn_ones(ys, 2, CN_F64, cn_cpu()), ad);
    cn_tensor *ri = cn_from_inner(cn_zeros(ys, 2, CN_I32, cn_cpu()), ad);
    CHECK_FAILS(cn_linear_add(x, w, NULL, r64), CN_ERR_DTYPE, "linear_add");
    CHECK_FAILS(cn_linear_add(x, w, NULL, ri), CN_ERR_KIND, "linear_add");
    CHECK_FAILS(cn_linear_add(x, cn_ones((int64_t[]){5, 7}, 2, CN_F32, cn_cpu()), NULL, r),
                CN_ERR_SHAPE, "matmul");
    /* the runtime still works after the errors */
    th_check_close("after misuse", cn_linear_add(x, w, NULL, r), cn_add(r, cn_linear(x, w, NULL)),
                   0);
    cn_scope_end();
}

int main(void) {
    RUN(test_matches_linear_then_add);
    RUN(test_hand_computed);
    RUN(test_no_grad_and_misuse);
    return th_finish();
}
