/* Data-parallel training (cn_ddp, cn_batches_new_sharded) under `mpirun -np 2`: 20 SGD steps of
 * a small MLP on 2 ranks, each with its 64-sample share of every global batch of 128, end at the
 * same parameters as one process training on the batches of 128 itself (the oracle, computed on
 * every rank with no communication). Each rank starts from different initial values, so the
 * result also proves that cn_ddp_new broadcast rank 0's. The tolerance is f32 rounding: the mean
 * of two half-batch mean gradients is summed in another order than the full-batch mean, which
 * changes the last bits of each step's update; after 20 steps the parameters agree to 2e-5 of
 * max(1, |w|) (measured differences: about 1e-7). The replicas themselves must stay
 * bit-identical, as every rank applies the same averaged gradient. Small buckets (512 bytes)
 * make several all-reduces overlap the backward. Also: a parameter the backward does not reach
 * on one rank (a zero gradient there), the default bucket layout, and cn_ddp_new on ranks whose
 * models differ fails on every rank, naming the rank. */
#include "cinder/distributed.h"
#include "harness.h"

enum { N = 512, IN = 8, HID = 16, OUT = 4, GLOBAL_BATCH = 128, STEPS = 20 };

static int R, W;
static cn_tensor *X, *Y; /* the data set, the same on every rank: [N, IN] f32, [N] i64 */

static cn_module *mlp(uint64_t seed) {
    cn_generator gen = cn_generator_new(seed);
    cn_device dev = cn_autodiff(cn_cpu());
    cn_module *layers[3] = {cn_linear_new(IN, HID, 1, dev, CN_F32, &gen),
                            cn_activation_new(CN_ACT_RELU),
                            cn_linear_new(HID, OUT, 1, dev, CN_F32, &gen)};
    return cn_sequential_new(layers, 3);
}

static int use_adamw; /* the optimizer of train() and of ZeRO's shard */

static cn_optimizer *make_optimizer(const cn_param *params, int n, void *ctx) {
    (void)ctx;
    return use_adamw ? cn_adamw_new(params, n, 1e-2, 0.9, 0.999, 1e-8, 0.01)
                     : cn_sgd_new(params, n, 0.1, 0.9, 0, 0, 0);
}

/* Trains model for STEPS steps on batches of `batch` from it; with d, through cn_ddp; with z,
 * through ZeRO-1 (which then holds the optimizer). */
static void train_with(cn_module *model, cn_batches *it, cn_ddp *d, cn_zero *z) {
    int n = 0;
    const cn_param *params = cn_module_params(model, &n);
    cn_optimizer *opt = z ? NULL : make_optimizer(params, n, NULL);
    CHECK(z || opt != NULL);
    int step = 0;
    for (uint64_t epoch = 0; step < STEPS; epoch++) {
        cn_batches_reset(it, epoch);
        cn_tensor *x, *y;
        while (step < STEPS && cn_batches_next(it, &x, &y) == 1) {
            cn_scope_begin();
            cn_tensor *loss = cn_cross_entropy(cn_module_forward(model, x), y, 0);
            cn_grads *g = cn_backward(loss);
            CHECK(g != NULL);
            /* every bucket's reduction was started by the hooks, inside the backward */
            if (d) CHECK(cn_ddp_started(d) == cn_ddp_bucket_count(d));
            if (d) CHECK(cn_ddp_sync(d, g) == CN_OK);
            if (d) CHECK(cn_ddp_started(d) == 0);
            if (z)
                CHECK(cn_zero_step(z, g) == CN_OK);
            else
                CHECK(cn_optimizer_step(opt, g) == CN_OK);
            cn_grads_free(g);
            cn_scope_end();
            cn_release(x);
            cn_release(y);
            step++;
        }
    }
    cn_optimizer_free(opt);
}

static void train(cn_module *model, cn_batches *it, cn_ddp *d) { train_with(model, it, d, NULL); }

static void test_ddp_matches_one_process(void) {
    /* the oracle: one process, batches of 128, rank 0's initial values */
    cn_module *ref = mlp(1);
    cn_batches *all = cn_batches_new(X, Y, GLOBAL_BATCH, 1, 42, 1);
    train(ref, all, NULL);
    cn_batches_free(all);

    /* data-parallel: each rank its own initial values, replaced by rank 0's */
    cn_module *model = mlp(1 + (uint64_t)R);
    int n = 0;
    const cn_param *params = cn_module_params(model, &n);
    cn_ddp *d = cn_ddp_new(params, n, 512);
    CHECK(d != NULL);
    CHECK(cn_ddp_bucket_count(d) >= 2);
    cn_batches *mine = cn_batches_new_sharded(X, Y, GLOBAL_BATCH / W, 1, 42, 1, R, W);
    CHECK(cn_batches_count(mine) == N / GLOBAL_BATCH);
    train(model, mine, d);
    cn_batches_free(mine);

    /* (a module's parameter list is valid until its next cn_module_params) */
    params = cn_module_params(model, &n);
    int nr = 0;
    const cn_param *rp = cn_module_params(ref, &nr);
    CHECK(nr == n);
    double worst = 0;
    for (int i = 0; i < n && i < nr; i++) {
        int64_t k = cn_numel(params[i].tensor);
        double *a = malloc(sizeof *a * (size_t)k), *b = malloc(sizeof *b * (size_t)k);
        CHECK(th_read(params[i].tensor, a) == k && th_read(rp[i].tensor, b) == k);
        for (int64_t j = 0; j < k; j++) {
            double diff = fabs(a[j] - b[j]) / (fabs(b[j]) > 1 ? fabs(b[j]) : 1);
            if (diff > worst) worst = diff;
        }
        /* bit-identical replicas: rank 0's copy against this rank's */
        cn_tensor *inner = cn_inner(params[i].tensor);
        cn_tensor *copy = cn_clone(inner);
        cn_release(inner);
        CHECK(cn_dist_broadcast(copy, 0) == CN_OK);
        float *mine_f = malloc(sizeof *mine_f * (size_t)k);
        float *root_f = malloc(sizeof *root_f * (size_t)k);
        CHECK(cn_read(params[i].tensor, mine_f, sizeof *mine_f * (size_t)k) == CN_OK);
        CHECK(cn_read(copy, root_f, sizeof *root_f * (size_t)k) == CN_OK);
        CHECK(memcmp(mine_f, root_f, sizeof *mine_f * (size_t)k) == 0);
        free(mine_f);
        free(root_f);
        cn_release(copy);
        free(a);
        free(b);
    }
    printf("rank %d: largest parameter difference from one process: %.3g\n", R, worst);
    CHECK(worst <= 2e-5);
    /* and the parameters moved: the comparison is not between two untrained models */
    cn_module *fresh = mlp(1);
    int nf = 0;
    const cn_param *fp = cn_module_params(fresh, &nf);
    double moved = 0, a0[OUT * HID], b0[OUT * HID];
    CHECK(th_read(fp[2].tensor, a0) == OUT * HID && th_read(params[2].tensor, b0) == OUT * HID);
    for (int j = 0; j < OUT * HID; j++) moved = fmax(moved, fabs(a0[j] - b0[j]));
    CHECK(moved > 1e-2);
    cn_module_free(fresh);
    cn_ddp_free(d);
    cn_module_free(model);
    cn_module_free(ref);
}

/* ZeRO-1 against plain DDP with the same optimizer, SGD with momentum then AdamW: the same
 * elementwise updates on each rank's part of the flat vector, so the same parameters to f32
 * rounding (2e-6 of max(1, |w|)); the shard is half the parameters (212 -> 106 elements), and
 * so is each state buffer of its optimizer. */
static void test_zero_matches_ddp(void) {
    for (use_adamw = 0; use_adamw < 2; use_adamw++) {
        cn_module *a = mlp(5 + (uint64_t)R), *b = mlp(5 + (uint64_t)R);
        int na = 0, nb = 0;
        const cn_param *pa = cn_module_params(a, &na);
        cn_ddp *d = cn_ddp_new(pa, na, 0);
        const cn_param *pb = cn_module_params(b, &nb);
        cn_zero *z = cn_zero_new(pb, nb, make_optimizer, NULL);
        CHECK(d && z);
        CHECK(cn_zero_shard_numel(z) == (IN * HID + HID + HID * OUT + OUT + W - 1) / W);
        cn_batches *ia = cn_batches_new_sharded(X, Y, GLOBAL_BATCH / W, 1, 9, 1, R, W);
        cn_batches *ib = cn_batches_new_sharded(X, Y, GLOBAL_BATCH / W, 1, 9, 1, R, W);
        train_with(a, ia, d, NULL);
        train_with(b, ib, NULL, z);
        int ns = 0;
        const cn_param *state = cn_optimizer_state(cn_zero_optimizer(z), &ns);
        CHECK(state && ns >= 1);
        for (int k = 0; k < ns; k++)
            CHECK(cn_numel(state[k].tensor) == 1 ||
                  cn_numel(state[k].tensor) == cn_zero_shard_numel(z));
        pa = cn_module_params(a, &na);
        pb = cn_module_params(b, &nb);
        double worst = 0;
        for (int i = 0; i < na; i++) {
            int64_t k = cn_numel(pa[i].tensor);
            double *va = malloc(sizeof *va * (size_t)k), *vb = malloc(sizeof *vb * (size_t)k);
            CHECK(th_read(pa[i].tensor, va) == k && th_read(pb[i].tensor, vb) == k);
            for (int64_t j = 0; j < k; j++)
                worst = fmax(worst, fabs(va[j] - vb[j]) / fmax(1, fabs(va[j])));
            free(va);
            free(vb);
        }
        printf("rank %d: ZeRO-1 (%s) against DDP: largest difference %.3g\n", R,
               use_adamw ? "adamw" : "sgd", worst);
        CHECK(worst <= 2e-6);
        cn_batches_free(ia);
        cn_batches_free(ib);
        cn_zero_free(z);
        cn_ddp_free(d);
        cn_module_free(a);
        cn_module_free(b);
    }
    use_adamw = 0;
}

/* A parameter that the backward does not reach on one rank counts as a zero gradient there: with
 * loss = sum(big) + sum(small) on rank 0 and sum(small) alone on rank 1, the mean gradient is
 * 1/2 for every element of `big` (on rank 0, the rank that has a gradient for it) and 1 for
 * `small`. `big` (1024 B, with buckets of 512) is a bucket of its own, reduced in place in its
 * gradient; `small` (64 B) is copied through a shared buffer; both paths meet the zero fill. */
static void test_ddp_unreached_parameter(void) {
    cn_device dev = cn_autodiff(cn_cpu());
    int64_t nb = 256, ns = 16;
    cn_param params[2] = {{"big", cn_require_grad(cn_ones(&nb, 1, CN_F32, dev))},
                          {"small", cn_require_grad(cn_ones(&ns, 1, CN_F32, dev))}};
    cn_ddp *d = cn_ddp_new(params, 2, 512);
    CHECK(d && cn_ddp_bucket_count(d) == 2);
    for (int step = 0; step < 2 && d; step++) { /* twice: the state is reset between steps */
        cn_scope_begin();
        cn_tensor *loss = cn_sum(params[1].tensor);
        if (R == 0) loss = cn_add(cn_sum(params[0].tensor), loss);
        cn_grads *g = cn_backward(loss);
        CHECK(g && cn_ddp_sync(d, g) == CN_OK);
        cn_tensor *gb = g ? cn_grad_find(g, params[0].tensor) : NULL;
        cn_tensor *gs = g ? cn_grad_find(g, params[1].tensor) : NULL;
        CHECK(R == 0 ? gb != NULL : gb == NULL);
        double vb[256], vs[16];
        if (gb) {
            CHECK(th_read(gb, vb) == nb);
            for (int i = 0; i < nb; i++) CHECK(vb[i] == 0.5);
        }
        CHECK(gs && th_read(gs, vs) == ns);
        for (int i = 0; gs && i < ns; i++) CHECK(vs[i] == 1.0);
        cn_grads_free(g);
        cn_scope_end();
    }
    cn_ddp_free(d);
    cn_release(params[0].tensor);
    cn_release(params[1].tensor);
}

/* The default buckets (bucket_bytes 0), as PyTorch's: a first one of 1 MiB, then 25 MiB; and a
 * parameter of 256 KiB or more alone. Reverse order: c (1 KiB) and b (512 KiB, alone) and
 * a (1 KiB): three buckets. */
static void test_ddp_default_buckets(void) {
    cn_device dev = cn_autodiff(cn_cpu());
    int64_t small = 256, large = 128 * 1024;
    cn_param params[3] = {{"a", cn_require_grad(cn_ones(&small, 1, CN_F32, dev))},
                          {"b", cn_require_grad(cn_ones(&large, 1, CN_F32, dev))},
                          {"c", cn_require_grad(cn_ones(&small, 1, CN_F32, dev))}};
    cn_ddp *d = cn_ddp_new(params, 3, 0);
    CHECK(d && cn_ddp_bucket_count(d) == 3);
    cn_ddp_free(d);
    cn_param two[2] = {params[0], params[2]}; /* 2 KiB: one bucket */
    d = cn_ddp_new(two, 2, 0);
    CHECK(d && cn_ddp_bucket_count(d) == 1);
    cn_ddp_free(d);
    for (int i = 0; i < 3; i++) cn_release(params[i].tensor);
}

static void test_ddp_misuse(void) {
    cn_module *model = mlp(3);
    int n = 0;
    const cn_param *params = cn_module_params(model, &n);
    /* the last rank leaves out the last parameter: every rank fails, naming it */
    char needle[64];
    snprintf(needle, sizeof needle, "rank %d called cn_ddp_new over %d parameters", W - 1, n - 1);
    cn_clear_error();
    CHECK(cn_ddp_new(params, R == W - 1 ? n - 1 : n, 0) == NULL);
    CHECK(cn_last_status() == CN_ERR_SHAPE && strstr(cn_last_error(), needle));
    cn_clear_error();
    /* a plain tensor is no parameter (on every rank: a local refusal everywhere) */
    int64_t two = 2;
    cn_param plain = {"plain", cn_ones(&two, 1, CN_F32, cn_cpu())};
    cn_clear_error();
    CHECK(cn_ddp_new(&plain, 1, 0) == NULL);
    CHECK(cn_last_status() == CN_ERR_AUTODIFF_NO_GRAD && strstr(cn_last_error(), "'plain'"));
    cn_clear_error();
    cn_release(plain.tensor);
    CHECK(cn_ddp_new(params, 0, 0) == NULL && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    CHECK(cn_ddp_sync(NULL, NULL) == CN_ERR_NULL_ARG);
    cn_clear_error();
    /* ZeRO-1: a factory is needed; one flat vector holds one dtype */
    CHECK(cn_zero_new(params, n, NULL, NULL) == NULL && cn_last_status() == CN_ERR_NULL_ARG);
    cn_clear_error();
    CHECK(cn_zero_step(NULL, NULL) == CN_ERR_NULL_ARG);
    cn_clear_error();
    cn_param mixed[2] = {{"a", cn_require_grad(cn_ones(&two, 1, CN_F32, cn_autodiff(cn_cpu())))},
                         {"b", cn_require_grad(cn_ones(&two, 1, CN_F64, cn_autodiff(cn_cpu())))}};
    CHECK(cn_zero_new(mixed, 2, make_optimizer, NULL) == NULL);
    CHECK(cn_last_status() == CN_ERR_DTYPE && strstr(cn_last_error(), "one dtype"));
    cn_clear_error();
    cn_release(mixed[0].tensor);
    cn_release(mixed[1].tensor);
    cn_module_free(model);
}

int main(void) {
    CHECK(cn_dist_init(CN_DIST_MPI) == CN_OK);
    R = cn_dist_rank();
    W = cn_dist_world_size();
    CHECK(W == 2);
    cn_dist_set_timeout(60);
    /* the data: x ~ N(0, 1), labels from a fixed linear rule, the same on every rank */
    cn_generator gen = cn_generator_new(7);
    int64_t xs[2] = {N, IN};
    X = cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32, cn_cpu());
    float xv[N * IN];
    int64_t yv[N];
    CHECK(cn_read(X, xv, sizeof xv) == CN_OK);
    for (int i = 0; i < N; i++) {
        double s = xv[i * IN] + 2 * xv[i * IN + 1] - xv[i * IN + 2];
        yv[i] = s < -1 ? 0 : s < 0 ? 1 : s < 1 ? 2 : 3;
    }
    int64_t n = N;
    Y = cn_from_data(yv, &n, 1, CN_I64, cn_cpu());
    if (W == 2) {
        RUN(test_ddp_matches_one_process);
        RUN(test_zero_matches_ddp);
        RUN(test_ddp_unreached_parameter);
        RUN(test_ddp_default_buckets);
        RUN(test_ddp_misuse);
    }
    cn_release(X);
    cn_release(Y);
    CHECK(cn_dist_finalize() == CN_OK);
    printf("rank %d: ", R);
    return th_finish() || th_checks_failed;
}
