/* `cinder train --ddp` (ddp.h): the distributed layer seen from the CLI. The averaging itself is
 * cn_ddp's (gradient-ready hooks start bucketed all-reduces during backward); this file adds the
 * loss's mean over the ranks, so that what rank 0 prints is the loss of the whole batch. */
#include <stdio.h>

#include "cli/ddp.h"

#ifdef CINDER_HAVE_DISTRIBUTED
#include "cinder/distributed.h"

/* whether d is a device of the CUDA backend (which exists only where it can be used) */
static int is_cuda(cn_device d) {
    cn_device cuda;
    if (cn_device_parse("cuda", &cuda) != CN_OK) {
        cn_clear_error(); /* no CUDA here: d is not on it */
        return 0;
    }
    return d.backend == cuda.backend;
}

int cli_ddp_begin(cn_device *inner, int *rank, int *world) {
    cn_dist_engine engine = is_cuda(*inner) ? CN_DIST_NCCL : CN_DIST_MPI;
    if (cn_dist_init(engine) != CN_OK) {
        fprintf(stderr, "cinder train: --ddp cannot join the job: %s\n", cn_last_error());
        return -1;
    }
    *rank = cn_dist_rank();
    *world = cn_dist_world_size();
    *inner = cn_dist_device();
    return 0;
}

static cn_status sync_step(void *ctx, cn_grads *grads, float *loss) {
    cn_status s = cn_ddp_sync(ctx, grads);
    double mean = *loss;
    if (s == CN_OK) s = cn_dist_reduce_scalar(&mean, CN_DIST_MEAN);
    *loss = (float)mean;
    return s;
}

int cli_ddp_attach(cli_model *m) {
    int n = 0;
    const cn_param *params = cn_module_params(m->net, &n);
    cn_ddp *d = params ? cn_ddp_new(params, n, 0) : NULL;
    if (!d) {
        fprintf(stderr, "cinder train: --ddp cannot share the model: %s\n", cn_last_error());
        return -1;
    }
    m->sync = sync_step;
    m->sync_ctx = d;
    return 0;
}

int cli_ddp_end(cli_model *m, int rc) {
    if (m && m->sync_ctx) cn_ddp_free(m->sync_ctx);
    if (m) m->sync = NULL, m->sync_ctx = NULL;
    if (!cn_dist_is_initialized()) return rc;
    if (rc != 0) {
        char why[96];
        snprintf(why, sizeof why, "`cinder train --ddp` failed on this rank (exit status %d; "
                 "its error is above)", rc);
        cn_dist_abort(rc, why);
    }
    if (cn_dist_finalize() != CN_OK) {
        fprintf(stderr, "cinder train: --ddp: leaving the job failed: %s\n", cn_last_error());
        return 1;
    }
    return rc;
}

#else /* built without the distributed layer */

int cli_ddp_begin(cn_device *inner, int *rank, int *world) {
    (void)inner;
    *rank = 0;
    *world = 1;
    fprintf(stderr, "cinder train: --ddp: this cinder was built without MPI, so it has no "
            "distributed layer; install MPI (`apt-get install libopenmpi-dev openmpi-bin`) and "
            "rebuild, or train without --ddp\n");
    return -1;
}

int cli_ddp_attach(cli_model *m) {
    (void)m;
    return -1;
}

int cli_ddp_end(cli_model *m, int rc) {
    (void)m;
    return rc;
}

#endif
