/* The MPI engine: CPU tensors, through MPI's non-blocking collectives (MPI-3) on the group's
 * communicator, so a collective proceeds while the caller computes (MPI progresses it inside
 * cn_dist_test / cn_dist_wait, which the cn_ddp hooks call during backward). Reductions map to
 * MPI_SUM, MPI_MAX and MPI_MIN on the dtype's MPI type; a mean is the sum divided by the world
 * size once it has arrived. Broadcast and all-gather move bytes, so they take every dtype. */
#include <limits.h>
#include <string.h>

#include "cinder/interop.h"
#include "distributed/dist_internal.h"

static int mpi_device_ok(cn_device d) { return d.backend == CN_BACKEND_CPU; }

static MPI_Datatype mpi_type(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return MPI_FLOAT;
    case CN_F64: return MPI_DOUBLE;
    case CN_I32: return MPI_INT32_T;
    case CN_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL; /* refused before: only reductions need a type */
    }
}

static MPI_Op mpi_op(cn_dist_op op) {
    return op == CN_DIST_MAX ? MPI_MAX : op == CN_DIST_MIN ? MPI_MIN : MPI_SUM;
}

/* MPI counts are ints: n items (elements or bytes) must fit one. */
static cn_status fits_int(const char *call, int64_t n) {
    if (n <= INT_MAX) return CN_OK;
    return cn_set_error(CN_ERR_OVERFLOW, call, "%lld items exceed MPI's count limit (%d) for one "
                        "call; split the tensor into slices of at most that many",
                        (long long)n, INT_MAX);
}

/* Open MPI's non-blocking collectives (coll/libnbc) reduce an in-place MPI_Iallreduce on fewer
 * than 4 ranks along a binomial tree: every rank copies its buffer aside, rank 0 receives all of
 * rank 1's, sums it and sends the whole result back, so rank 0 moves and sums twice what it
 * needs to and the two transfers run one after the other. Rabenseifner's algorithm (a
 * reduce-scatter by vector halving, then an all-gather), which libnbc has but picks only for a
 * large out-of-place reduction on 4 ranks or more, has each of 2 ranks receive and sum one half
 * and receive the other half summed: half the bytes and half the additions per rank, in the
 * same two rounds (docs/distributed.md: CPU time per reduction of the CNN's 1.6 MB bucket, rank
 * 0 0.65-0.74 ms -> 0.39-0.47 ms). It is chosen for cn_ddp's bucket reductions (w->halving) of
 * at least a world's number of elements (its requirement), through the MPI tool interface's
 * control variable coll_libnbc_iallreduce_algorithm (3), set for the call that starts the
 * reduction and restored after it, so that no other reduction of the process changes. An
 * algorithm the user chose (`--mca coll_libnbc_iallreduce_algorithm N`, or OMPI_MCA_...) is
 * kept, and where the variable does not exist (another MPI, or a libnbc without it) nothing is
 * done. Starting the tool interface costs about 0.2 s (Open MPI registers every component's
 * variables), once: dist__mpi_prefer_halving, from cn_ddp_new. */
#define NBC_RABENSEIFNER 3

static struct {
    int state; /* 0: not looked up; 1: usable; -1: absent, or chosen by the user */
    MPI_T_cvar_handle handle;
} nbc = {0, MPI_T_CVAR_HANDLE_NULL};

void dist__mpi_prefer_halving(void) {
    if (nbc.state != 0) return;
    int provided = 0, index = -1, count = 0, value = 0;
    nbc.state = -1;
    if (MPI_T_init_thread(MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &nbc.handle, &count) == MPI_SUCCESS) {
        if (count == 1 && MPI_T_cvar_read(nbc.handle, &value) == MPI_SUCCESS && value == 0) {
            nbc.state = 1;
            return;
        }
        MPI_T_cvar_handle_free(&nbc.handle);
    }
    MPI_T_finalize();
}

/* Sets libnbc's all-reduce algorithm to `value` (0: its own choice) where it may be set. */
static void nbc_choose(int value) {
    if (nbc.state == 1) MPI_T_cvar_write(nbc.handle, &value);
}

static cn_status mpi_finalize(void) {
    if (nbc.state == 1) {
        MPI_T_cvar_handle_free(&nbc.handle);
        MPI_T_finalize();
    }
    nbc.state = 0;
    return CN_OK;
}

static cn_status mpi_start(cn_dist_work *w) {
    const char *op = "dist_mpi";
    MPI_Comm comm = dist__state.comm;
    void *out = cn_data_ptr(w->out);
    int64_t elem = (int64_t)cn_dtype_size(w->dtype);
    int rc = MPI_SUCCESS;
    switch (w->kind) {
    case DIST_ALL_REDUCE:
        if (fits_int(op, w->count) != CN_OK) return cn_last_status();
        if (w->halving && w->count >= dist__state.world) nbc_choose(NBC_RABENSEIFNER);
        rc = MPI_Iallreduce(MPI_IN_PLACE, out, (int)w->count, mpi_type(w->dtype), mpi_op(w->op),
                            comm, &w->req);
        if (w->halving && w->count >= dist__state.world) nbc_choose(0);
        break;
    case DIST_BROADCAST:
        if (fits_int(op, w->count * elem) != CN_OK) return cn_last_status();
        rc = MPI_Ibcast(out, (int)(w->count * elem), MPI_BYTE, w->root, comm, &w->req);
        break;
    case DIST_REDUCE_SCATTER:
        if (fits_int(op, w->count) != CN_OK) return cn_last_status();
        rc = MPI_Ireduce_scatter_block(cn_data_ptr(w->in), out, (int)w->count,
                                       mpi_type(w->dtype), mpi_op(w->op), comm, &w->req);
        break;
    case DIST_ALL_GATHER:
        if (fits_int(op, w->count * elem) != CN_OK) return cn_last_status();
        rc = MPI_Iallgather(cn_data_ptr(w->in), (int)(w->count * elem), MPI_BYTE, out,
                            (int)(w->count * elem), MPI_BYTE, comm, &w->req);
        break;
    default:
        return cn_set_error(CN_ERR_BACKEND, op, "collective %d has no MPI call; this is a bug in "
                            "cinder: please report it", (int)w->kind);
    }
    if (rc != MPI_SUCCESS) {
        dist__break("an MPI error when starting a collective");
        return dist__mpi_error(op, "starting the collective", rc);
    }
    return CN_OK;
}

/* out /= world size, in host memory (a mean from a sum). In f32, for a world size that is a power
 * of two, multiplying by its reciprocal (exact) gives the bits of the division in double (both
 * round the exact quotient once to the nearest float; test_dist_collectives checks it, subnormal
 * results included), at a quarter of the cost: the double division of the CNN's 1.6 MB bucket
 * took 280 us a step, the multiplication 60-70 us (docs/benchmarks.md, round 6). Other world
 * sizes keep the division. */
static void divide(cn_dist_work *w) {
    const int world = dist__state.world;
    const double k = (double)world;
    const int64_t n = cn_numel(w->out);
    if (w->dtype == CN_F32 && (world & (world - 1)) == 0) {
        float *p = cn_data_ptr(w->out);
        const float r = 1.0f / (float)world;
        for (int64_t i = 0; i < n; i++) p[i] *= r;
    } else if (w->dtype == CN_F32) {
        float *p = cn_data_ptr(w->out);
        for (int64_t i = 0; i < n; i++) p[i] = (float)(p[i] / k);
    } else if (w->dtype == CN_F64) {
        double *p = cn_data_ptr(w->out);
        for (int64_t i = 0; i < n; i++) p[i] /= k;
    }
}

static int mpi_test(cn_dist_work *w) {
    if (w->done) return 1;
    int done = 0;
    int rc = MPI_Test(&w->req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        w->done = 1;
        w->status = dist__mpi_error("dist_wait", "the collective", rc);
        dist__break("an MPI error during a collective");
        return 1;
    }
    if (!done) return 0;
    w->done = 1;
    if (w->op == CN_DIST_MEAN && (w->kind == DIST_ALL_REDUCE || w->kind == DIST_REDUCE_SCATTER))
        divide(w);
    return 1;
}

/* A request abandoned after a timeout cannot be freed (MPI forbids it for collectives) and MPI
 * may still write its buffers: they are kept (returns 0), as the group is broken. */
static int mpi_release(cn_dist_work *w) { return w->done || w->req == MPI_REQUEST_NULL; }

const dist_engine dist__mpi_engine = {
    .name = "MPI",
    .device_ok = mpi_device_ok,
    .start = mpi_start,
    .test = mpi_test,
    .release = mpi_release,
    .abort = NULL,
    .finalize = mpi_finalize,
};
