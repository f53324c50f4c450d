/* `cinder train --ddp` (ddp.h): the distributed layer seen from the CLI. The averaging itself is
 * cn_ddp's (gradient-ready hooks start bucketed all-reduces during backward); this file adds the
 * loss's mean over the ranks, so that what rank 0 prints is the loss of the whole batch, and the
 * agreements that let a data-parallel run be interrupted and resumed: on the step to stop before,
 * and on the checkpoint every rank resumes from. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/ddp.h"
#include "cli/step_profile.h"

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
    cli_profile_buckets(cn_ddp_started(ctx), cn_ddp_bucket_count(ctx));
    cn_status s = cn_ddp_sync(ctx, grads);
    cli_profile_mark(CLI_PHASE_SYNC);
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

double cli_ddp_accuracy(cli_model *m, cn_tensor *images, cn_tensor *labels, int64_t batch) {
    const int64_t n = cn_shape(images)[0], rank = cn_dist_rank(), world = cn_dist_world_size();
    const int64_t lo = n * rank / world, hi = n * (rank + 1) / world;
    double correct = 0;
    if (hi > lo) {
        cn_tensor *x = cn_slice(images, 0, lo, hi, 1), *y = cn_slice(labels, 0, lo, hi, 1);
        double a = x && y ? cli_model_accuracy(m, x, y, batch) : -1;
        cn_release(x);
        cn_release(y);
        /* a failure here joins the sum as NaN, so that every rank fails */
        correct = a < 0 ? NAN : (double)llround(a * (double)(hi - lo));
    }
    cn_status failed_here = correct != correct ? cn_last_status() : CN_OK;
    if (cn_dist_reduce_scalar(&correct, CN_DIST_SUM) != CN_OK) return -1;
    if (correct != correct) {
        if (failed_here == CN_OK)
            cn_set_error(CN_ERR_BACKEND, "cli_ddp_accuracy", "the evaluation failed on another "
                         "rank (its error is printed by that rank)");
        return -1;
    }
    return n ? correct / (double)n : 0.0;
}

/* the signal the ranks agreed to stop on (cli_ddp_stop_signal), 0 before they did */
static int agreed_signal;

int cli_ddp_stop_signal(int sig) {
    double v = sig;
    if (cn_dist_reduce_scalar(&v, CN_DIST_MAX) != CN_OK) {
        fprintf(stderr, "cinder train: --ddp: the ranks cannot agree on whether to stop: %s\n",
                cn_last_error());
        return -1;
    }
    if (v > 0) agreed_signal = (int)v;
    return (int)v;
}

/* FNV-1a over the file's bytes, or -1 after printing why it cannot be read. */
static int hash_file(const char *path, uint64_t *h) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cinder train: --ddp: rank %d cannot read %s again: ", cn_dist_rank(),
                path);
        perror(NULL);
        return -1;
    }
    unsigned char buf[1 << 16];
    size_t n;
    *h = 1469598103934665603ull;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t k = 0; k < n; k++) *h = (*h ^ buf[k]) * 1099511628211ull;
    int bad = ferror(f);
    fclose(f);
    if (bad)
        fprintf(stderr, "cinder train: --ddp: rank %d cannot read %s again\n", cn_dist_rank(),
                path);
    return bad ? -1 : 0;
}

int cli_ddp_same_file(const char *path) {
    uint64_t h = 0;
    /* 53 bits of the hash, exact in a double; -1 for a rank that could not read the file */
    double mine = hash_file(path, &h) == 0 ? (double)(h >> 11) : -1.0, lo = mine, hi = mine;
    if (cn_dist_reduce_scalar(&lo, CN_DIST_MIN) != CN_OK ||
        cn_dist_reduce_scalar(&hi, CN_DIST_MAX) != CN_OK) {
        fprintf(stderr, "cinder train: --ddp: the ranks cannot compare their checkpoints: %s\n",
                cn_last_error());
        return -1;
    }
    if (lo == hi && lo >= 0) return 0;
    if (lo >= 0)
        fprintf(stderr, "cinder train: --ddp --resume %s: the ranks read different files under "
                "that name (rank %d's hash %016llx is not every rank's); give every rank the "
                "same checkpoint: a shared file system, or one file copied to each machine\n",
                path, cn_dist_rank(), (unsigned long long)h);
    else
        fprintf(stderr, "cinder train: --ddp --resume %s: a rank cannot read the file; give "
                "every rank the same checkpoint\n", path);
    return -1;
}

int cli_ddp_end(cli_model *m, int rc) {
    if (m && m->sync_ctx) cn_ddp_free(m->sync_ctx);
    if (m) m->sync = NULL, m->sync_ctx = NULL;
    if (!cn_dist_is_initialized()) return rc;
    /* a stop the ranks agreed on is not a failure: every rank stops alike */
    if (rc != 0 && !(agreed_signal && rc == 128 + agreed_signal)) {
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

double cli_ddp_accuracy(cli_model *m, cn_tensor *images, cn_tensor *labels, int64_t batch) {
    return cli_model_accuracy(m, images, labels, batch);
}

int cli_ddp_stop_signal(int sig) { return sig; }

int cli_ddp_same_file(const char *path) {
    (void)path;
    return 0;
}

int cli_ddp_end(cli_model *m, int rc) {
    (void)m;
    return rc;
}

#endif
