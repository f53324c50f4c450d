/* The NCCL engine on CUDA tensors, run by ctest as `mpirun -np 1` (one rank per GPU: a machine
 * with more GPUs can run it with -np 2 by hand): all_reduce (sum, mean), broadcast,
 * reduce_scatter and all_gather against values computed by hand from the rank numbers, as in
 * test_dist_collectives.c, a CPU tensor refused (CN_ERR_DEVICE_MISMATCH), and cn_ddp over a
 * CUDA model averaging its gradients. Skips (77) where the NCCL engine is not compiled in or no
 * GPU can be used. */
#include "cinder/distributed.h"
#include "harness.h"

static int R, W;

static cn_tensor *on_gpu(const double *v, int64_t n, cn_dtype dt) {
    cn_tensor *h = th_tensor(v, &n, 1, dt);
    cn_tensor *g = cn_to_device(h, cn_dist_device());
    cn_release(h);
    return g;
}

static void test_collectives_on_gpu(void) {
    double v[8], want[8];
    double tri = W * (W + 1) / 2.0;
    for (int k = 0; k < 4; k++) v[k] = (R + 1) * (k + 1);
    cn_tensor *t = on_gpu(v, 4, CN_F32);
    CHECK(cn_dist_all_reduce(t, CN_DIST_SUM) == CN_OK);
    for (int k = 0; k < 4; k++) want[k] = (k + 1) * tri;
    th_check_values("nccl all_reduce sum", t, want, 4, 0);
    CHECK(cn_dist_all_reduce(t, CN_DIST_MEAN) == CN_OK);
    th_check_values("nccl all_reduce mean of equal values", t, want, 4, 1e-6);
    cn_release(t);

    for (int k = 0; k < 4; k++) v[k] = 10.0 * R + k;
    t = on_gpu(v, 4, CN_I64);
    CHECK(cn_dist_broadcast(t, 0) == CN_OK);
    for (int k = 0; k < 4; k++) want[k] = k;
    th_check_values("nccl broadcast", t, want, 4, 0);
    cn_release(t);

    for (int k = 0; k < 2 * W; k++) v[k] = (R + 1) * (k + 1);
    cn_tensor *in = on_gpu(v, 2 * W, CN_F64);
    cn_tensor *out = cn_zeros((int64_t[]){2}, 1, CN_F64, cn_dist_device());
    CHECK(cn_dist_reduce_scatter(out, in, CN_DIST_SUM) == CN_OK);
    want[0] = (2 * R + 1) * tri;
    want[1] = (2 * R + 2) * tri;
    th_check_values("nccl reduce_scatter", out, want, 2, 0);
    cn_release(in);
    cn_release(out);

    v[0] = R;
    v[1] = R + 0.5;
    in = on_gpu(v, 2, CN_F32);
    out = cn_zeros((int64_t[]){W, 2}, 2, CN_F32, cn_dist_device());
    CHECK(cn_dist_all_gather(out, in) == CN_OK);
    for (int r = 0; r < W; r++) {
        want[2 * r] = r;
        want[2 * r + 1] = r + 0.5;
    }
    th_check_values("nccl all_gather", out, want, 2 * W, 0);
    cn_release(in);
    cn_release(out);

    cn_tensor *cpu = cn_ones((int64_t[]){3}, 1, CN_F32, cn_cpu());
    CHECK_STATUS_FAILS(cn_dist_all_reduce(cpu, CN_DIST_SUM), CN_ERR_DEVICE_MISMATCH,
                       "not on the NCCL engine's device");
    cn_release(cpu);
}

static void test_ddp_on_gpu(void) {
    /* loss = sum(w * x) with x = rank + 1: each rank's gradient is x; the mean is (W + 1) / 2 */
    cn_device dev = cn_autodiff(cn_dist_device());
    cn_tensor *w = cn_require_grad(cn_zeros((int64_t[]){3}, 1, CN_F32, dev));
    cn_param p = {"w", w};
    cn_ddp *d = cn_ddp_new(&p, 1, 0);
    CHECK(d != NULL);
    cn_scope_begin();
    cn_tensor *x = cn_full((int64_t[]){3}, 1, R + 1.0, CN_F32, cn_dist_device());
    cn_grads *g = cn_backward(cn_sum(cn_mul(w, x)));
    CHECK(g && cn_ddp_sync(d, g) == CN_OK);
    double want[3] = {(W + 1) / 2.0, (W + 1) / 2.0, (W + 1) / 2.0};
    if (g) th_check_values("ddp mean gradient on the GPU", cn_grad(g, w), want, 3, 1e-6);
    cn_grads_free(g);
    cn_scope_end();
    cn_ddp_free(d);
    cn_release(w);
}

int main(void) {
    if (!cn_dist_engine_compiled(CN_DIST_NCCL) || cn_backend_device_count("cuda") < 1) {
        printf("skipped: %s\n", cn_dist_engine_compiled(CN_DIST_NCCL) ? "no usable GPU"
                                                                      : "no NCCL engine built");
        return 77;
    }
    if (cn_dist_init(CN_DIST_NCCL) != CN_OK) {
        fprintf(stderr, "cn_dist_init(CN_DIST_NCCL): %s\n", cn_last_error());
        return 1;
    }
    R = cn_dist_rank();
    W = cn_dist_world_size();
    cn_dist_set_timeout(60);
    RUN(test_collectives_on_gpu);
    RUN(test_ddp_on_gpu);
    CHECK(cn_dist_finalize() == CN_OK);
    return th_finish() || th_checks_failed;
}
