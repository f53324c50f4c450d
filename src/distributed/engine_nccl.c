/* The NCCL engine: CUDA tensors, one GPU per rank (local rank mod the node's GPU count), through
 * NCCL's collectives on a stream of the engine's own. A collective waits for the work cinder
 * queued on the device (cn_cuda_synchronize), is queued on the stream with an event after it,
 * and is done when the event is (cudaEventQuery), so the host goes on while the GPUs exchange.
 * The communicator is created from an id that rank 0 makes and broadcasts over MPI. A timeout
 * aborts the communicator (ncclCommAbort), which ends the kernels still waiting for a peer.
 * Plain C over the C APIs of the CUDA runtime and NCCL: compiled without nvcc. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "cinder/cuda.h"
#include "cinder/interop.h"
#include "distributed/dist_internal.h"

static struct {
    ncclComm_t comm;
    cudaStream_t stream;
    int device;
    int16_t backend; /* the cuda backend's registry id */
} nccl;

static cn_status cuda_error(const char *op, const char *call, cudaError_t e) {
    dist__break("a CUDA error in the NCCL engine");
    return cn_set_error(CN_ERR_BACKEND, op, "%s failed on rank %d: %s", call, dist__state.rank,
                        cudaGetErrorString(e));
}

static cn_status nccl_error(const char *op, const char *call, ncclResult_t r) {
    dist__break("an NCCL error");
    return cn_set_error(CN_ERR_BACKEND, op, "%s failed on rank %d: %s", call, dist__state.rank,
                        ncclGetErrorString(r));
}

cn_status dist__nccl_init(void) {
    const char *op = "dist_init";
    cn_device cuda;
    if (cn_device_parse("cuda", &cuda) != CN_OK)
        return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "the NCCL engine needs a CUDA device, "
                            "and none can be used here (%s); use CN_DIST_MPI on CPU tensors",
                            cn_last_error());
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1)
        return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "the NCCL engine needs a CUDA device "
                            "and rank %d sees none (%s); use CN_DIST_MPI on CPU tensors",
                            dist__state.rank, e != cudaSuccess ? cudaGetErrorString(e) : "0");
    nccl.device = dist__state.local_rank % count;
    nccl.backend = cuda.backend;
    if ((e = cudaSetDevice(nccl.device)) != cudaSuccess) return cuda_error(op, "cudaSetDevice", e);
    /* rank 0's id, with its status: a rank 0 that could not make one still joins the broadcast,
     * and every rank then fails instead of waiting in ncclCommInitRank */
    struct { int status; ncclUniqueId id; } boot;
    memset(&boot, 0, sizeof boot);
    if (dist__state.rank == 0) boot.status = (int)ncclGetUniqueId(&boot.id);
    int rc = MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, dist__state.comm);
    if (rc != MPI_SUCCESS) return dist__mpi_error(op, "MPI_Bcast of the NCCL id", rc);
    ncclResult_t r = (ncclResult_t)boot.status;
    if (r != ncclSuccess) return nccl_error(op, "ncclGetUniqueId on rank 0", r);
    ncclUniqueId id = boot.id;
    if ((e = cudaStreamCreateWithFlags(&nccl.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_error(op, "cudaStreamCreate", e);
    r = ncclCommInitRank(&nccl.comm, dist__state.world, id, dist__state.rank);
    if (r != ncclSuccess) {
        cudaStreamDestroy(nccl.stream);
        return nccl_error(op, "ncclCommInitRank", r);
    }
    dist__state.eng = &dist__nccl_engine;
    dist__state.device = (cn_device){.backend = cuda.backend, .index = (int16_t)nccl.device};
    return CN_OK;
}

static int nccl_device_ok(cn_device d) {
    return d.backend == nccl.backend && d.index == nccl.device;
}

static ncclDataType_t nccl_type(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return ncclFloat32;
    case CN_F64: return ncclFloat64;
    case CN_F16: return ncclFloat16;
    case CN_BF16: return ncclBfloat16;
    case CN_I32: return ncclInt32;
    case CN_I64: return ncclInt64;
    default: return ncclUint8; /* bytes: broadcast and all-gather only */
    }
}

static ncclRedOp_t nccl_op(cn_dist_op op) {
    switch (op) {
    case CN_DIST_MEAN: return ncclAvg;
    case CN_DIST_MAX: return ncclMax;
    case CN_DIST_MIN: return ncclMin;
    default: return ncclSum;
    }
}

static cn_status nccl_start(cn_dist_work *w) {
    const char *op = "dist_nccl";
    /* the inputs are written by kernels cinder queued on its own stream */
    if (cn_cuda_synchronize(nccl.device) != CN_OK) return cn_last_status();
    void *out = cn_data_ptr(w->out);
    size_t n = (size_t)w->count;
    ncclDataType_t t = nccl_type(w->dtype);
    if (t == ncclUint8) n *= cn_dtype_size(w->dtype);
    ncclResult_t r;
    switch (w->kind) {
    case DIST_ALL_REDUCE:
        r = ncclAllReduce(out, out, n, t, nccl_op(w->op), nccl.comm, nccl.stream);
        break;
    case DIST_BROADCAST:
        r = ncclBroadcast(out, out, n, t, w->root, nccl.comm, nccl.stream);
        break;
    case DIST_REDUCE_SCATTER:
        r = ncclReduceScatter(cn_data_ptr(w->in), out, n, t, nccl_op(w->op), nccl.comm,
                              nccl.stream);
        break;
    case DIST_ALL_GATHER:
        r = ncclAllGather(cn_data_ptr(w->in), out, n, t, nccl.comm, nccl.stream);
        break;
    default:
        return cn_set_error(CN_ERR_BACKEND, op, "collective %d has no NCCL call; this is a bug in "
                            "cinder: please report it", (int)w->kind);
    }
    if (r != ncclSuccess) return nccl_error(op, "starting the collective", r);
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, nccl.stream);
    if (e != cudaSuccess) return cuda_error(op, "recording the collective's event", e);
    w->event = ev;
    return CN_OK;
}

static int nccl_test(cn_dist_work *w) {
    if (w->done) return 1;
    cudaError_t e = cudaEventQuery((cudaEvent_t)w->event);
    if (e == cudaErrorNotReady) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(nccl.comm, &async) == ncclSuccess && async == ncclSuccess)
            return 0;
        w->done = 1;
        w->status = nccl_error("dist_wait", "the collective", async);
        return 1;
    }
    w->done = 1;
    if (e != cudaSuccess) w->status = cuda_error("dist_wait", "the collective", e);
    return 1;
}

static int nccl_release(cn_dist_work *w) {
    if (w->event) cudaEventDestroy((cudaEvent_t)w->event);
    w->event = NULL;
    return 1; /* after a timeout the communicator was aborted: nothing writes the buffers */
}

static void nccl_abort(void) {
    if (nccl.comm) ncclCommAbort(nccl.comm);
    nccl.comm = NULL;
}

static cn_status nccl_finalize(void) {
    cn_status s = CN_OK;
    if (nccl.comm) {
        ncclResult_t r = ncclCommDestroy(nccl.comm);
        if (r != ncclSuccess) s = nccl_error("dist_finalize", "ncclCommDestroy", r);
    }
    if (nccl.stream) cudaStreamDestroy(nccl.stream);
    nccl.comm = NULL;
    nccl.stream = NULL;
    return s;
}

const dist_engine dist__nccl_engine = {
    .name = "NCCL",
    .device_ok = nccl_device_ok,
    .start = nccl_start,
    .test = nccl_test,
    .release = nccl_release,
    .abort = nccl_abort,
    .finalize = nccl_finalize,
};
