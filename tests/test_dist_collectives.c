/* The collectives of cinder/distributed.h over MPI, run by ctest as `mpirun -np 2`: each one
 * against values computed by hand from the rank numbers (rank r contributes (r + 1) * k, so over
 * W ranks the sum is k * W (W + 1) / 2, the max k * W, the min k), and the misuse errors: a call
 * before init and after finalize, a tensor on another backend's device, ranks that disagree on
 * the shape, the dtype or the root, a mean of integers, a tracked tensor outside no-grad mode.
 * After each refused call the group must still work. Every rank checks and reports; the test
 * fails when any rank does. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinder/backend.h"
#include "cinder/distributed.h"
#include "harness.h"

static int R, W; /* this rank, the world size */

static cn_tensor *filled(const int64_t *shape, int ndim, cn_dtype dt, double (*f)(int64_t)) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double v[64];
    for (int64_t i = 0; i < n; i++) v[i] = f(i);
    return th_tensor(v, shape, ndim, dt);
}

static double rank_times(int64_t k) { return (double)((R + 1) * (k + 1)); }
static double tri(void) { return W * (W + 1) / 2.0; }

static void test_all_reduce_ops(void) {
    int64_t shape[2] = {2, 3};
    double want[6];
    const cn_dtype dts[4] = {CN_F32, CN_F64, CN_I32, CN_I64};
    for (int d = 0; d < 4; d++) {
        cn_tensor *t = filled(shape, 2, dts[d], rank_times);
        CHECK(cn_dist_all_reduce(t, CN_DIST_SUM) == CN_OK);
        for (int k = 0; k < 6; k++) want[k] = (k + 1) * tri();
        th_check_values("all_reduce sum", t, want, 6, 0);
        cn_release(t);

        t = filled(shape, 2, dts[d], rank_times);
        CHECK(cn_dist_all_reduce(t, CN_DIST_MAX) == CN_OK);
        for (int k = 0; k < 6; k++) want[k] = (k + 1) * W;
        th_check_values("all_reduce max", t, want, 6, 0);
        cn_release(t);

        t = filled(shape, 2, dts[d], rank_times);
        CHECK(cn_dist_all_reduce(t, CN_DIST_MIN) == CN_OK);
        for (int k = 0; k < 6; k++) want[k] = k + 1;
        th_check_values("all_reduce min", t, want, 6, 0);
        cn_release(t);
    }
    /* mean: for W = 2, (1 + 2) k / 2 = 1.5 k, exact in f32 */
    cn_tensor *t = filled(shape, 2, CN_F32, rank_times);
    CHECK(cn_dist_all_reduce(t, CN_DIST_MEAN) == CN_OK);
    for (int k = 0; k < 6; k++) want[k] = (k + 1) * tri() / W;
    th_check_values("all_reduce mean", t, want, 6, 0);
    cn_release(t);
}

/* Sums and means of f32 vectors of 1 element (fewer than the ranks), as many elements as ranks,
 * an odd count, and 300,001 elements (1.2 MB, past Open MPI's eager and fragment sizes, so moved
 * by its large-message protocol), the mean reduced non-blocking while this rank computes. Every
 * element is a small integer, so the sums are exact. (cn_ddp's buckets take Rabenseifner's
 * algorithm where Open MPI's libnbc lets it be chosen, engine_mpi.c; test_dist_train checks
 * them against one process.) */
static void test_all_reduce_sizes(void) {
    const int64_t sizes[4] = {1, 2, 7, 300001};
    for (int c = 0; c < 4; c++) {
        const int64_t n = sizes[c];
        double *v = malloc((size_t)n * sizeof *v), *want = malloc((size_t)n * sizeof *want);
        CHECK(v && want);
        if (!v || !want) {
            free(v);
            free(want);
            return;
        }
        for (int64_t k = 0; k < n; k++) {
            v[k] = (double)((R + 1) * (k % 97 + 1));
            want[k] = (double)(k % 97 + 1) * tri();
        }
        cn_tensor *t = th_tensor(v, &n, 1, CN_F32);
        CHECK(cn_dist_all_reduce(t, CN_DIST_SUM) == CN_OK);
        th_check_values("all_reduce sum by size", t, want, n, 0);
        cn_release(t);
        /* the mean, reduced non-blocking while this rank computes */
        t = th_tensor(v, &n, 1, CN_F32);
        cn_dist_work *w = cn_dist_all_reduce_async(t, CN_DIST_MEAN);
        CHECK(w != NULL);
        cn_tensor *other = th_tensor(v, &n, 1, CN_F32), *busy = cn_exp(other);
        CHECK(w && cn_dist_wait(w) == CN_OK);
        for (int64_t k = 0; k < n; k++) want[k] /= W;
        th_check_values("all_reduce mean by size", t, want, n, 0);
        cn_release(busy);
        cn_release(other);
        cn_release(t);
        free(v);
        free(want);
    }
}

/* The mean's rounding, against the division in double of the f32 sum (what the engine computed
 * before multiplying by the reciprocal of a power-of-two world size, engine_mpi.c): values
 * that are not multiples of a power of two, large ones, and subnormal ones whose halves round.
 * With 2 ranks the f32 sum is a + b whatever the algorithm, so the result is known bit for bit;
 * other world sizes sum in an order MPI chooses, and the check is skipped. */
static float mean_input(int rank, int64_t k) {
    if (k % 5 == 4) return (float)(rank + 1) * 1.4e-45f * (float)(k % 7 + 1); /* subnormal */
    return (float)((rank + 1) * 0.1 * (double)(k + 1)) * (k % 3 == 0 ? 1e30f : 1.0f);
}

static void test_mean_rounding(void) {
    if (W != 2) return;
    const int64_t n = 4099;
    float *v = malloc((size_t)n * sizeof *v), *got = malloc((size_t)n * sizeof *got);
    CHECK(v && got);
    if (!v || !got) {
        free(v);
        free(got);
        return;
    }
    for (int64_t k = 0; k < n; k++) v[k] = mean_input(R, k);
    cn_tensor *t = cn_from_data(v, &n, 1, CN_F32, cn_cpu());
    CHECK(t && cn_dist_all_reduce(t, CN_DIST_MEAN) == CN_OK);
    CHECK(t && cn_read(t, got, (size_t)n * sizeof *got) == CN_OK);
    int64_t bad = 0;
    for (int64_t k = 0; k < n; k++) {
        float sum = mean_input(0, k) + mean_input(1, k);
        float want = (float)((double)sum / 2.0);
        if (memcmp(&want, &got[k], sizeof want) != 0 && bad++ < 3)
            fprintf(stderr, "mean rounding: element %lld is %a, want %a\n", (long long)k,
                    (double)got[k], (double)want);
    }
    CHECK(bad == 0);
    cn_release(t);
    free(v);
    free(got);
}

static void test_async_and_strided(void) {
    /* two reductions in flight at once, waited in the other order, with compute between */
    int64_t n = 5;
    cn_tensor *a = filled(&n, 1, CN_F64, rank_times);
    cn_tensor *b = filled(&n, 1, CN_F32, rank_times);
    cn_dist_work *wa = cn_dist_all_reduce_async(a, CN_DIST_SUM);
    cn_dist_work *wb = cn_dist_all_reduce_async(b, CN_DIST_MAX);
    CHECK(wa && wb);
    cn_tensor *one = cn_ones(&n, 1, CN_F64, cn_cpu());
    cn_tensor *busy = cn_exp(one);
    cn_release(one);
    CHECK(cn_dist_wait(wb) == CN_OK);
    CHECK(cn_dist_wait(wa) == CN_OK);
    double want[5];
    for (int k = 0; k < 5; k++) want[k] = (k + 1) * tri();
    th_check_values("async sum", a, want, 5, 0);
    for (int k = 0; k < 5; k++) want[k] = (k + 1) * W;
    th_check_values("async max", b, want, 5, 0);
    cn_release(busy);
    cn_release(a);
    cn_release(b);

    /* a transposed view: reduced through a dense copy, written back into the base's memory */
    int64_t shape[2] = {2, 3};
    cn_tensor *base = filled(shape, 2, CN_F32, rank_times);
    cn_tensor *view = cn_transpose(base, 0, 1);
    CHECK(!cn_is_contiguous(view));
    CHECK(cn_dist_all_reduce(view, CN_DIST_SUM) == CN_OK);
    double want6[6];
    for (int k = 0; k < 6; k++) want6[k] = (k + 1) * tri();
    th_check_values("strided sum, read through the base", base, want6, 6, 0);
    cn_release(view);
    cn_release(base);
}

static double ten_rank(int64_t k) { return 10.0 * R + (double)k; }
static double two_ranks_row(int64_t k) { return R + 0.5 * (double)k; }

static void test_broadcast_gather_scatter(void) {
    int64_t n = 4;
    const int root = W - 1;
    cn_tensor *t = filled(&n, 1, CN_I64, ten_rank);
    CHECK(cn_dist_broadcast(t, root) == CN_OK);
    double want[16];
    for (int k = 0; k < 4; k++) want[k] = 10.0 * root + k;
    th_check_values("broadcast", t, want, 4, 0);
    cn_release(t);

    /* all_gather: rank r's [r, r + 0.5] in row r of out [W, 2] */
    int64_t two = 2, out_shape[2] = {W, 2};
    cn_tensor *in = filled(&two, 1, CN_F32, two_ranks_row);
    cn_tensor *out = cn_zeros(out_shape, 2, CN_F32, cn_cpu());
    CHECK(cn_dist_all_gather(out, in) == CN_OK);
    for (int r = 0; r < W; r++) {
        want[2 * r] = r;
        want[2 * r + 1] = r + 0.5;
    }
    th_check_values("all_gather", out, want, 2 * W, 0);
    cn_release(in);
    cn_release(out);

    /* reduce_scatter: in[j] = (r + 1)(j + 1) for j < 2W; rank r keeps j in [2r, 2r + 2), summed */
    int64_t whole = 2 * W;
    in = filled(&whole, 1, CN_F64, rank_times);
    out = cn_zeros(&two, 1, CN_F64, cn_cpu());
    CHECK(cn_dist_reduce_scatter(out, in, CN_DIST_SUM) == CN_OK);
    want[0] = (2 * R + 1) * tri();
    want[1] = (2 * R + 2) * tri();
    th_check_values("reduce_scatter sum", out, want, 2, 0);
    CHECK(cn_dist_reduce_scatter(out, in, CN_DIST_MEAN) == CN_OK);
    want[0] /= W;
    want[1] /= W;
    th_check_values("reduce_scatter mean", out, want, 2, 1e-15);
    cn_release(in);
    cn_release(out);

    CHECK(cn_dist_barrier() == CN_OK);
    double v = R + 1;
    CHECK(cn_dist_reduce_scalar(&v, CN_DIST_SUM) == CN_OK);
    CHECK(v == tri());
    v = R + 1;
    CHECK(cn_dist_reduce_scalar(&v, CN_DIST_MEAN) == CN_OK);
    CHECK(v == tri() / W);
}

/* The group still works after a refused call. */
static void still_works(void) {
    double v = 1;
    CHECK(cn_dist_reduce_scalar(&v, CN_DIST_SUM) == CN_OK && v == W);
}

static void test_mismatch_detected(void) {
    char needle[64];
    snprintf(needle, sizeof needle, "rank %d called all_reduce(sum) of f32 [%d]", W - 1, 3 + 1);
    /* the last rank gives one element more: every rank fails, naming it and both shapes */
    int64_t n = R == W - 1 ? 4 : 3;
    cn_tensor *t = cn_ones(&n, 1, CN_F32, cn_cpu());
    CHECK_STATUS_FAILS(cn_dist_all_reduce(t, CN_DIST_SUM), CN_ERR_SHAPE, needle);
    double want[4] = {1, 1, 1, 1};
    th_check_values("untouched after a mismatch", t, want, n, 0);
    cn_release(t);
    still_works();

    /* another dtype on the last rank */
    n = 3;
    t = cn_ones(&n, 1, R == W - 1 ? CN_F64 : CN_F32, cn_cpu());
    CHECK_STATUS_FAILS(cn_dist_all_reduce(t, CN_DIST_SUM), CN_ERR_DTYPE, "f64 [3]");
    cn_release(t);
    still_works();

    /* another collective on the last rank */
    t = cn_ones(&n, 1, CN_F32, cn_cpu());
    if (R == W - 1)
        CHECK_STATUS_FAILS(cn_dist_broadcast(t, 0), CN_ERR_SHAPE, "but rank 0 called all_reduce");
    else
        CHECK_STATUS_FAILS(cn_dist_all_reduce(t, CN_DIST_SUM), CN_ERR_SHAPE, "called broadcast");
    cn_release(t);
    still_works();

    /* a rank whose own arguments are wrong (root out of range) makes the others fail too */
    t = cn_ones(&n, 1, CN_F32, cn_cpu());
    if (R == W - 1)
        CHECK_STATUS_FAILS(cn_dist_broadcast(t, W + 3), CN_ERR_INVALID_ARG, "give 0 to");
    else
        CHECK_STATUS_FAILS(cn_dist_broadcast(t, 0), CN_ERR_INVALID_ARG, "refused its own");
    cn_release(t);
    still_works();
}

static void test_local_misuse(void) {
    int64_t n = 3, bad = 5;
    cn_tensor *i = cn_ones(&n, 1, CN_I32, cn_cpu());
    CHECK_STATUS_FAILS(cn_dist_all_reduce(i, CN_DIST_MEAN), CN_ERR_DTYPE, "mean: float only");
    CHECK_STATUS_FAILS(cn_dist_all_reduce(i, (cn_dist_op)9), CN_ERR_INVALID_ARG, "op = 9");
    cn_release(i);
    CHECK_STATUS_FAILS(cn_dist_all_reduce(NULL, CN_DIST_SUM), CN_ERR_NULL_ARG, "t");

    /* reduce_scatter and all_gather check the counts against the world size */
    cn_tensor *out = cn_zeros(&n, 1, CN_F32, cn_cpu());
    cn_tensor *in = cn_zeros(&bad, 1, CN_F32, cn_cpu());
    CHECK_STATUS_FAILS(cn_dist_reduce_scatter(out, in, CN_DIST_SUM), CN_ERR_SHAPE,
                       "must hold world size");
    CHECK_STATUS_FAILS(cn_dist_all_gather(in, out), CN_ERR_SHAPE, "must hold world size");
    CHECK_STATUS_FAILS(cn_dist_all_gather(out, NULL), CN_ERR_NULL_ARG, "in");
    cn_release(out);
    cn_release(in);

    /* a tracked tensor is written in place only in no-grad mode */
    cn_tensor *p = cn_require_grad(cn_ones(&n, 1, CN_F32, cn_autodiff(cn_cpu())));
    CHECK_STATUS_FAILS(cn_dist_all_reduce(p, CN_DIST_SUM), CN_ERR_AUTODIFF_INPLACE,
                       "cn_no_grad_begin");
    cn_no_grad_begin();
    CHECK(cn_dist_all_reduce(p, CN_DIST_SUM) == CN_OK);
    cn_no_grad_end();
    double want[3] = {W, W, W};
    th_check_values("tracked, in no-grad mode", p, want, 3, 0);
    cn_release(p);

    /* a tensor of another backend: a copy of the CPU backend registered under another name */
    static int other = -1;
    if (other < 0) {
        cn_backend b = *cn_backend_get(CN_BACKEND_CPU);
        b.name = "elsewhere";
        other = cn_backend_register(&b);
    }
    CHECK(other > 0);
    cn_device dev = {(int16_t)other, 0, 0, 0};
    cn_tensor *e = cn_ones(&n, 1, CN_F32, dev);
    CHECK_STATUS_FAILS(cn_dist_all_reduce(e, CN_DIST_SUM), CN_ERR_DEVICE_MISMATCH,
                       "not on the MPI engine's device cpu:0");
    cn_release(e);
    CHECK_STATUS_FAILS(cn_dist_set_timeout(0), CN_ERR_INVALID_ARG, "positive");
    CHECK_STATUS_FAILS(cn_dist_init(CN_DIST_MPI), CN_ERR_INVALID_ARG, "already initialised");
    still_works();
}

int main(void) {
    int64_t n = 2;
    cn_tensor *t = cn_ones(&n, 1, CN_F32, cn_cpu());
    CHECK(!cn_dist_is_initialized() && cn_dist_world_size() == 1);
    CHECK_STATUS_FAILS(cn_dist_all_reduce(t, CN_DIST_SUM), CN_ERR_DEVICE_UNAVAILABLE,
                       "call cn_dist_init");
    CHECK_STATUS_FAILS(cn_dist_barrier(), CN_ERR_DEVICE_UNAVAILABLE, "not initialised");
    if (!cn_dist_engine_compiled(CN_DIST_NCCL))
        CHECK_STATUS_FAILS(cn_dist_init(CN_DIST_NCCL), CN_ERR_DEVICE_UNAVAILABLE, "no NCCL");
    CHECK(cn_dist_init(CN_DIST_MPI) == CN_OK);
    R = cn_dist_rank();
    W = cn_dist_world_size();
    CHECK(W >= 2);
    CHECK(cn_dist_local_rank() == R); /* mpirun -np 2 on one node */
    /* each collective fails on every rank alike if one of them is stuck, rather than hanging */
    cn_dist_set_timeout(60);
    if (W >= 2) {
        RUN(test_all_reduce_ops);
        RUN(test_all_reduce_sizes);
        RUN(test_mean_rounding);
        RUN(test_async_and_strided);
        RUN(test_broadcast_gather_scatter);
        RUN(test_mismatch_detected);
        RUN(test_local_misuse);
    }
    CHECK(cn_dist_finalize() == CN_OK);
    CHECK_STATUS_FAILS(cn_dist_all_reduce(t, CN_DIST_SUM), CN_ERR_DEVICE_UNAVAILABLE,
                       "call cn_dist_init");
    CHECK_STATUS_FAILS(cn_dist_finalize(), CN_ERR_DEVICE_UNAVAILABLE, "not initialised");
    cn_release(t);
    printf("rank %d: ", R);
    return th_finish() || th_checks_failed;
}
