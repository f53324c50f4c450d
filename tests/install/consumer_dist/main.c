/* Run by the install test under `mpirun -np 2`, linked against the installed
 * libcinder_distributed.so: joins the job; all-reduces a tensor in which rank r holds r + 1 (the
 * sum over two ranks is 3 in every element, by hand); and keeps a parameter in step with cn_ddp:
 * rank r starts from w = r + 1 (cn_ddp_new gives every rank rank 0's, 1), and the gradient of
 * sum(w * (r + 1)) is r + 1 on rank r, whose mean over the ranks is 1.5. Exits 0 when all holds. */
#include <stdio.h>

#include <cinder/cinder.h>
#include <cinder/distributed.h>

static int fail(const char *what) {
    fprintf(stderr, "consumer_dist: rank %d: %s: %s\n", cn_dist_rank(), what, cn_last_error());
    return 1;
}

int main(void) {
    if (cn_dist_init(CN_DIST_MPI) != CN_OK) return fail("cn_dist_init");
    const int rank = cn_dist_rank();
    if (cn_dist_world_size() != 2) return fail("the world is not of 2 ranks");
    int64_t n = 4;
    cn_tensor *t = cn_full(&n, 1, rank + 1.0, CN_F32, cn_cpu());
    float v[4];
    if (!t || cn_dist_all_reduce(t, CN_DIST_SUM) != CN_OK || cn_read(t, v, sizeof v) != CN_OK)
        return fail("all_reduce");
    for (int i = 0; i < 4; i++)
        if (v[i] != 3.0f) return fail("the all-reduced sum is not 3");

    cn_device dev = cn_autodiff(cn_cpu());
    cn_param p = {"w", cn_require_grad(cn_full(&n, 1, rank + 1.0, CN_F32, dev))};
    cn_ddp *d = p.tensor ? cn_ddp_new(&p, 1, 0) : NULL;
    if (!d) return fail("cn_ddp_new");
    float w[4], gv[4];
    cn_scope_begin(); /* the step's tensors, released at its end */
    cn_tensor *c = cn_full(&n, 1, rank + 1.0, CN_F32, dev);
    cn_grads *g = cn_backward(cn_sum(cn_mul(p.tensor, c)));
    int ok = g && cn_ddp_sync(d, g) == CN_OK && cn_read(p.tensor, w, sizeof w) == CN_OK &&
             cn_read(cn_grad(g, p.tensor), gv, sizeof gv) == CN_OK;
    cn_grads_free(g);
    cn_scope_end();
    if (!ok) return fail("the ddp step");
    for (int i = 0; i < 4; i++)
        if (w[i] != 1.0f || gv[i] != 1.5f) return fail("the ddp values are not 1 and 1.5");
    cn_ddp_free(d);
    cn_release(p.tensor);
    cn_release(t);
    if (cn_dist_finalize() != CN_OK) return fail("cn_dist_finalize");
    if (rank == 0) printf("consumer_dist: 2 ranks, all-reduce and ddp as computed by hand\n");
    return 0;
}
