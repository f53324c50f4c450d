/* Every error the router raises: each returns NULL with a status and a message that names the
 * op, the argument and a way out, and leaves the inputs as they were. */
#include "harness.h"

static cn_tensor *vec(const double *v, int64_t n, cn_dtype dt) { return th_tensor(v, &n, 1, dt); }

static void test_shape_mismatch(void) {
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t s23[2] = {2, 3};
    cn_tensor *a = th_tensor(v, s23, 2, CN_F32);
    cn_tensor *b = vec(v, 4, CN_F32);
    CHECK_FAILS(cn_add(a, b), CN_ERR_SHAPE, "add: incompatible shapes");
    CHECK_FAILS(cn_add(a, b), CN_ERR_SHAPE, "[2, 3] f32 cpu:0");
    CHECK_FAILS(cn_mul(a, b), CN_ERR_SHAPE, "cn_reshape");
    th_check_values("a untouched", a, v, 6, 0);
    cn_release(a);
    cn_release(b);
}

static void test_dtype_mismatch(void) {
    double v[2] = {1, 2};
    cn_tensor *a = vec(v, 2, CN_F32), *b = vec(v, 2, CN_F64);
    CHECK_FAILS(cn_add(a, b), CN_ERR_DTYPE, "cn_cast");
    CHECK_FAILS(cn_where(a, a, a), CN_ERR_KIND, "cond");
    cn_release(a);
    cn_release(b);
}

static void test_kind_mismatch(void) {
    double v[2] = {1, 2};
    cn_tensor *i = vec(v, 2, CN_I32), *f = vec(v, 2, CN_F32);
    CHECK_FAILS(cn_exp(i), CN_ERR_KIND, "exp");
    CHECK_FAILS(cn_exp(i), CN_ERR_KIND, "cn_cast(x, CN_F32)");
    CHECK_FAILS(cn_logical_and(f, f), CN_ERR_KIND, "bool");
    CHECK_FAILS(cn_logsumexp(i), CN_ERR_KIND, "logsumexp"); /* ints average (burn's int_mean) */
    cn_tensor *b = vec(v, 2, CN_BOOL);
    CHECK_FAILS(cn_matmul(b, b), CN_ERR_KIND, "matmul"); /* ints multiply since issue 16 */
    cn_release(b);
    cn_release(i);
    cn_release(f);
}

static void test_null_propagation(void) {
    double v[2] = {1, 2};
    cn_tensor *a = vec(v, 2, CN_F32), *i = vec(v, 2, CN_I32);
    /* the first failure's error survives a chain of calls */
    cn_clear_error();
    cn_tensor *r = cn_relu(cn_add_scalar(cn_exp(i), 1.0));
    CHECK(r == NULL);
    CHECK(cn_last_status() == CN_ERR_KIND && strncmp(cn_last_error(), "exp:", 4) == 0);
    /* a NULL argument without an earlier error is reported as such */
    CHECK_FAILS(cn_add(NULL, a), CN_ERR_NULL_ARG, "'a'");
    CHECK_FAILS(cn_sum(NULL), CN_ERR_NULL_ARG, "sum");
    cn_release(a);
    cn_release(i);
}

static void test_bad_dims_and_args(void) {
    double v[4] = {1, 2, 3, 4};
    int64_t s[2] = {2, 2};
    cn_tensor *a = th_tensor(v, s, 2, CN_F32);
    CHECK_FAILS(cn_sum_dim(a, 2, 0), CN_ERR_INVALID_ARG, "dim = 2");
    CHECK_FAILS(cn_softmax(a, -3), CN_ERR_INVALID_ARG, "softmax");
    CHECK_FAILS(cn_transpose(a, 0, 5), CN_ERR_INVALID_ARG, "transpose");
    CHECK_FAILS(cn_clamp(a, 2, 1), CN_ERR_INVALID_ARG, "clamp");
    CHECK_FAILS(cn_gelu(a, (cn_gelu_approx)9), CN_ERR_INVALID_ARG, "gelu");
    CHECK_FAILS(cn_cast(a, (cn_dtype)99), CN_ERR_DTYPE, "cast");
    cn_release(a);
}

static void test_broadcast_shapes(void) {
    double a3[3] = {1, 2, 3}, b2[2] = {10, 20};
    int64_t s31[2] = {3, 1}, s2[1] = {2};
    cn_tensor *a = th_tensor(a3, s31, 2, CN_F64), *b = th_tensor(b2, s2, 1, CN_F64);
    cn_tensor *c = cn_add(a, b);
    int64_t want_shape[2] = {3, 2};
    th_check_shape("broadcast", c, want_shape, 2);
    double want[6] = {11, 21, 12, 22, 13, 23};
    th_check_values("broadcast", c, want, 6, 0);
    cn_release(a);
    cn_release(b);
    cn_release(c);
}

int main(void) {
    RUN(test_shape_mismatch);
    RUN(test_dtype_mismatch);
    RUN(test_kind_mismatch);
    RUN(test_null_propagation);
    RUN(test_bad_dims_and_args);
    RUN(test_broadcast_shapes);
    return th_finish();
}
