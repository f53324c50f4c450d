/* The process group and the collectives' front-end: init and finalize over MPI, the checks every
 * collective makes (initialised, the calling thread, the tensors' devices and dtypes), the
 * agreement step that catches ranks calling different collectives or shapes, and the waits with
 * a timeout. The engines (engine_mpi.c, engine_nccl.c) only move dense buffers. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "cinder/memory.h"
#include "cinder/ops.h"
#include "distributed/dist_internal.h"

dist_state dist__state;
static double timeout_s; /* 0: not set, read CINDER_DIST_TIMEOUT */

/* ---- libcinder through its public API (dist_internal.h) -------------------------------------- */

void *dist__calloc(const char *op, size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        cn_set_error(CN_ERR_OUT_OF_MEMORY, op, "no memory for %zu x %zu bytes of host memory",
                     count, size);
    return p;
}

void dist__free(void *p) { free(p); }

cn_status dist__null_arg(const char *op, const char *arg) {
    if (cn_last_status() != CN_OK) return cn_last_status(); /* what produced the NULL */
    return cn_set_error(CN_ERR_NULL_ARG, op, "argument '%s' is NULL; check the call that "
                        "produced it (it returned NULL without an error, or the error was "
                        "cleared)", arg);
}

cn_tensor *dist__own(cn_tensor *t) { return t && cn_scope_depth() > 0 ? cn_retain(t) : t; }

const char *dist__shape_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld",
                                 (long long)shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- small helpers --------------------------------------------------------------------------- */

double dist__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double dist__timeout(void) {
    if (timeout_s > 0) return timeout_s;
    const char *env = getenv("CINDER_DIST_TIMEOUT");
    double v = env ? strtod(env, NULL) : 0;
    return v > 0 ? v : 600;
}

cn_status cn_dist_set_timeout(double seconds) {
    if (!(seconds > 0))
        return cn_set_error(CN_ERR_INVALID_ARG, "dist_set_timeout", "seconds = %g; give a "
                            "positive number of seconds", seconds);
    timeout_s = seconds;
    return CN_OK;
}

cn_status dist__mpi_error(const char *op, const char *call, int code) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "code %d", code);
    return cn_set_error(CN_ERR_BACKEND, op, "%s failed on rank %d: %s", call, dist__state.rank,
                        text);
}

void dist__break(const char *why) {
    if (dist__state.broken) return;
    dist__state.broken = 1;
    snprintf(dist__state.broken_why, sizeof dist__state.broken_why, "%s", why);
}

/* Between two polls of a wait that began at `started`: MPI moves a message only while it is
 * called (a large one in many fragments), so for the first second the wait only yields the core
 * (as MPI_Wait does when oversubscribed); a longer wait is a late rank, polled every millisecond
 * so that it costs no core. */
void dist__pause(double started) {
    if (dist__now() - started < 1.0) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* The checks of every call: initialised, not broken, on the owning thread. */
cn_status dist__check_group(const char *op) {
    if (!dist__state.initialized)
        return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "the distributed group is not "
                            "initialised; call cn_dist_init(CN_DIST_MPI or CN_DIST_NCCL) first, "
                            "in a program started by mpirun or srun");
    if (!pthread_equal(dist__state.owner, pthread_self()))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "called from a thread other than the one "
                            "that called cn_dist_init (MPI runs FUNNELED); make every cn_dist_* "
                            "call from that thread");
    if (dist__state.broken)
        return cn_set_error(CN_ERR_BACKEND, op, "the group is broken since an earlier failure "
                            "(%s); end the job with cn_dist_abort", dist__state.broken_why);
    return CN_OK;
}

/* ---- init and finalize ----------------------------------------------------------------------- */

int cn_dist_engine_compiled(cn_dist_engine engine) {
    if (engine == CN_DIST_MPI) return 1;
#ifdef CINDER_HAVE_NCCL
    if (engine == CN_DIST_NCCL) return 1;
#endif
    return 0;
}

static void free_comm(void) {
    if (dist__state.comm != MPI_COMM_NULL) MPI_Comm_free(&dist__state.comm);
    dist__state.comm = MPI_COMM_NULL;
}

cn_status cn_dist_init(cn_dist_engine engine) {
    const char *op = "dist_init";
    if (dist__state.initialized)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "the group is already initialised (rank %d "
                            "of %d); call cn_dist_finalize before initialising it again",
                            dist__state.rank, dist__state.world);
    if (engine != CN_DIST_MPI && engine != CN_DIST_NCCL)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "engine = %d; give CN_DIST_MPI (CPU tensors) "
                            "or CN_DIST_NCCL (CUDA tensors)", (int)engine);
    if (!cn_dist_engine_compiled(engine))
        return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "this build has no NCCL engine (it "
                            "is built with the CUDA backend when nccl.h and libnccl are found); "
                            "use CN_DIST_MPI on CPU tensors, or rebuild with NCCL (NCCL_ROOT)");
    dist_state st = {.comm = MPI_COMM_NULL, .engine = engine};
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return cn_set_error(CN_ERR_BACKEND, op, "MPI was already finalized in this process and "
                            "cannot start again; initialise the group once per program");
    if (!inited) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return dist__mpi_error(op, "MPI_Init_thread", rc);
        st.we_init_mpi = 1;
    }
    MPI_Comm node = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &st.comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(st.comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(st.comm, &st.rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(st.comm, &st.world);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_split_type(st.comm, MPI_COMM_TYPE_SHARED, st.rank, MPI_INFO_NULL, &node);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(node, &st.local_rank);
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    st.owner = pthread_self();
    st.eng = &dist__mpi_engine;
    st.device = cn_cpu();
    st.initialized = 1;
    dist__state = st;
    cn_status s = rc == MPI_SUCCESS ? CN_OK
                                    : dist__mpi_error(op, "setting up the communicator", rc);
#ifdef CINDER_HAVE_NCCL
    if (s == CN_OK && engine == CN_DIST_NCCL) s = dist__nccl_init();
#endif
    if (s != CN_OK) {
        free_comm();
        if (st.we_init_mpi) MPI_Finalize();
        memset(&dist__state, 0, sizeof dist__state);
        dist__state.comm = MPI_COMM_NULL;
    }
    return s;
}

cn_status cn_dist_finalize(void) {
    const char *op = "dist_finalize";
    if (!dist__state.initialized)
        return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "the distributed group is not "
                            "initialised (never, or finalized already); nothing to finalize");
    cn_status s = dist__state.eng->finalize ? dist__state.eng->finalize() : CN_OK;
    free_comm();
    int rc = dist__state.we_init_mpi ? MPI_Finalize() : MPI_SUCCESS;
    memset(&dist__state, 0, sizeof dist__state);
    dist__state.comm = MPI_COMM_NULL;
    if (rc != MPI_SUCCESS) return dist__mpi_error(op, "MPI_Finalize", rc);
    return s;
}

void cn_dist_abort(int code, const char *why) {
    fprintf(stderr, "cinder: rank %d aborts the job: %s\n", dist__state.rank,
            why ? why : "(no reason given)");
    fflush(stderr);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
    exit(code);
}

int cn_dist_is_initialized(void) { return dist__state.initialized; }
int cn_dist_rank(void) { return dist__state.initialized ? dist__state.rank : 0; }
int cn_dist_world_size(void) { return dist__state.initialized ? dist__state.world : 1; }
int cn_dist_local_rank(void) { return dist__state.initialized ? dist__state.local_rank : 0; }
cn_device cn_dist_device(void) { return dist__state.initialized ? dist__state.device : cn_cpu(); }

/* ---- the agreement step ---------------------------------------------------------------------- */

enum { DIST_TAG_AGREE = 7301 };

/* Polls reqs until all are done or the deadline passes; returns the index of the first that is
 * not done, or -1 (dist__pause between polls). */
static int poll_until(MPI_Request *reqs, int n, double deadline, int *rc) {
    *rc = MPI_SUCCESS;
    const double started = dist__now();
    for (;;) {
        int all = 0;
        *rc = MPI_Testall(n, reqs, &all, MPI_STATUSES_IGNORE);
        if (*rc != MPI_SUCCESS || all) return -1;
        if (dist__now() > deadline) break;
        dist__pause(started);
    }
    for (int i = 0; i < n; i++) {
        int done = 0;
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
        if (!done) return i;
    }
    return -1;
}

cn_status dist__agree(const char *op, const int64_t *desc, int len, dist_describe_fn describe) {
    const int world = dist__state.world, me = dist__state.rank;
    if (world == 1) return CN_OK;
    int64_t *all = dist__calloc(op, (size_t)world * (size_t)len, sizeof *all);
    MPI_Request *reqs = dist__calloc(op, 2 * (size_t)world, sizeof *reqs);
    if (!all || !reqs) {
        dist__free(all);
        dist__free(reqs);
        return cn_last_status();
    }
    memcpy(all + (size_t)me * len, desc, sizeof *desc * (size_t)len);
    int rc = MPI_SUCCESS, n = 0;
    for (int r = 0; r < world && rc == MPI_SUCCESS; r++) {
        if (r == me) continue;
        rc = MPI_Irecv(all + (size_t)r * len, len, MPI_INT64_T, r, DIST_TAG_AGREE,
                       dist__state.comm, &reqs[n++]);
    }
    int n_recv = n;
    for (int r = 0; r < world && rc == MPI_SUCCESS; r++) {
        if (r == me) continue;
        rc = MPI_Isend(desc, len, MPI_INT64_T, r, DIST_TAG_AGREE, dist__state.comm, &reqs[n++]);
    }
    cn_status s = CN_OK;
    if (rc != MPI_SUCCESS) {
        s = dist__mpi_error(op, "exchanging the call's descriptor", rc);
        dist__break("an MPI error while ranks exchanged a call's descriptor");
    } else {
        int late = poll_until(reqs, n, dist__now() + dist__timeout(), &rc);
        if (rc != MPI_SUCCESS) {
            s = dist__mpi_error(op, "exchanging the call's descriptor", rc);
            dist__break("an MPI error while ranks exchanged a call's descriptor");
        } else if (late >= 0) {
            /* name every rank whose descriptor has not come: those have not joined */
            char names[192] = "";
            size_t used = 0;
            for (int i = 0, r = 0; i < n_recv; i++, r++) {
                if (r == me) r++;
                int done = reqs[i] == MPI_REQUEST_NULL;
                if (!done) MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
                if (done || used + 16 >= sizeof names) continue;
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%d",
                                         used ? ", " : "", r);
            }
            s = cn_set_error(CN_ERR_BACKEND, op, "rank(s) %s did not join this collective within "
                             "%g s (rank %d waited): they failed, stopped, or call the "
                             "collectives in another order; end the job (cn_dist_abort), or "
                             "raise the timeout (cn_dist_set_timeout, CINDER_DIST_TIMEOUT) for "
                             "slow ranks", used ? names : "?", dist__timeout(), me);
            char why[256];
            snprintf(why, sizeof why, "rank(s) %.180s did not join a collective in time",
                     used ? names : "?");
            dist__break(why);
        }
    }
    for (int i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        if (i < n_recv) {
            MPI_Cancel(&reqs[i]);
            MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        } else {
            MPI_Request_free(&reqs[i]);
        }
    }
    dist__free(reqs);
    if (s == CN_OK) {
        /* every rank sees the same descriptors, so every rank fails alike */
        if (desc[0] < 0) s = (cn_status)-desc[0]; /* this rank's own error is already set */
        for (int r = 0; r < world && s == CN_OK; r++) {
            const int64_t *d = all + (size_t)r * len;
            if (d[0] < 0)
                s = cn_set_error((cn_status)-d[0], op, "rank %d refused its own arguments of "
                                 "this collective (%s), so no rank runs it; its error message "
                                 "says why", r, cn_status_name((cn_status)-d[0]));
        }
        for (int r = 1; r < world && s == CN_OK; r++) {
            const int64_t *d = all + (size_t)r * len;
            if (memcmp(d, all, sizeof *d * (size_t)len) == 0) continue;
            char a[256], b[256];
            describe(all, a, sizeof a);
            describe(d, b, sizeof b);
            cn_status code = d[0] == all[0] && d[0] != DIST_DDP && d[1] != all[1] ? CN_ERR_DTYPE
                                                                         : CN_ERR_SHAPE;
            s = cn_set_error(code, op, "rank %d called %s, but rank 0 called %s; every rank "
                             "must call the same collectives in one order, on tensors of one "
                             "dtype and shape", r, b, a);
        }
    }
    dist__free(all);
    return s;
}

/* ---- collectives ----------------------------------------------------------------------------- */

static const char *kind_name(int64_t kind) {
    switch (kind) {
    case DIST_ALL_REDUCE: return "all_reduce";
    case DIST_BROADCAST: return "broadcast";
    case DIST_REDUCE_SCATTER: return "reduce_scatter";
    case DIST_ALL_GATHER: return "all_gather";
    case DIST_BARRIER: return "barrier";
    case DIST_SCALAR: return "reduce_scalar";
    case DIST_DDP: return "ddp_new";
    }
    return "?";
}

static const char *op_name(int64_t op) {
    static const char *names[] = {"sum", "mean", "max", "min"};
    return op >= 0 && op < 4 ? names[op] : "?";
}

/* desc: kind, dtype, op, root, in ndim, in shape[CN_MAX_DIMS], out ndim, out shape[...] */
enum { DESC_IN = 4, DESC_OUT = 5 + CN_MAX_DIMS, DESC_LEN = 6 + 2 * CN_MAX_DIMS };

static void describe_collective(const int64_t *d, char *buf, size_t size) {
    char in[96], out[96];
    int in_nd = (int)d[DESC_IN], out_nd = (int)d[DESC_OUT];
    dist__shape_str(d + DESC_IN + 1, in_nd < 0 ? 0 : in_nd, in, sizeof in);
    dist__shape_str(d + DESC_OUT + 1, out_nd < 0 ? 0 : out_nd, out, sizeof out);
    const char *dt = cn_dtype_name((cn_dtype)d[1]);
    switch (d[0]) {
    case DIST_ALL_REDUCE:
        snprintf(buf, size, "all_reduce(%s) of %s %s", op_name(d[2]), dt, out);
        break;
    case DIST_BROADCAST:
        snprintf(buf, size, "broadcast from rank %lld of %s %s", (long long)d[3], dt, out);
        break;
    case DIST_REDUCE_SCATTER:
        snprintf(buf, size, "reduce_scatter(%s) of %s %s into %s", op_name(d[2]), dt, in, out);
        break;
    case DIST_ALL_GATHER:
        snprintf(buf, size, "all_gather of %s %s into %s", dt, in, out);
        break;
    default: snprintf(buf, size, "%s", kind_name(d[0]));
    }
}

static void desc_shape(int64_t *slot, const cn_tensor *t) {
    if (!t) return;
    slot[0] = cn_ndim(t);
    for (int i = 0; i < cn_ndim(t); i++) slot[1 + i] = cn_shape(t)[i];
}

/* Checks one tensor argument: present, on the engine's device, and (when written) not tracked
 * outside no-grad mode. */
static cn_status check_tensor(const char *op, const char *arg, cn_tensor *t, int written) {
    /* (a freed t is caught, under CINDER_CHECK_MISUSE, by cn_device_of below) */
    if (!t) {
        dist__null_arg(op, arg);
        return cn_last_status();
    }
    char buf[128], dev[48];
    cn_device d = cn_inner_device(cn_device_of(t));
    if (!dist__state.eng->device_ok(d))
        return cn_set_error(CN_ERR_DEVICE_MISMATCH, op, "'%s' %s is not on the %s engine's "
                            "device %s; move it there with cn_to_device, or initialise the "
                            "engine of its device (CN_DIST_MPI: the CPU, CN_DIST_NCCL: CUDA)",
                            arg, cn_tensor_str(t, buf, sizeof buf), dist__state.eng->name,
                            cn_device_str(dist__state.device, dev, sizeof dev));
    if (written && cn_requires_grad(t) && cn_grad_enabled())
        return cn_set_error(CN_ERR_AUTODIFF_INPLACE, op, "'%s' %s is tracked, and the collective "
                            "writes it in place; call it between cn_no_grad_begin() and "
                            "cn_no_grad_end(), or on cn_detach(%s)", arg,
                            cn_tensor_str(t, buf, sizeof buf), arg);
    return CN_OK;
}

static int reducible(cn_dtype dt, cn_dist_op how) {
    int nccl = dist__state.engine == CN_DIST_NCCL;
    if (how == CN_DIST_MEAN && cn_dtype_kind(dt) != CN_KIND_FLOAT) return 0;
    switch (dt) {
    case CN_F32: case CN_F64: case CN_I32: case CN_I64: return 1;
    case CN_F16: case CN_BF16: return nccl;
    default: return 0;
    }
}

static cn_status check_reduction(const char *op, cn_tensor *t, cn_dist_op how) {
    if ((int)how < CN_DIST_SUM || (int)how > CN_DIST_MIN)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "op = %d; give CN_DIST_SUM, CN_DIST_MEAN, "
                            "CN_DIST_MAX or CN_DIST_MIN", (int)how);
    if (!reducible(cn_dtype_of(t), how))
        return cn_set_error(CN_ERR_DTYPE, op, "the %s engine cannot reduce (%s) a %s tensor; "
                            "it reduces f32, f64, i32 and i64%s (mean: float only); cast it "
                            "with cn_cast first", dist__state.eng->name, op_name(how),
                            cn_dtype_name(cn_dtype_of(t)),
                            dist__state.engine == CN_DIST_NCCL ? ", f16 and bf16" : "");
    return CN_OK;
}

/* A dense buffer over t: t itself when contiguous, else a copy (written back by the wait). */
static cn_tensor *dense(cn_tensor *t) {
    if (cn_is_contiguous(t)) return cn_retain(t);
    return dist__own(cn_contiguous(t));
}

static void work_free(cn_dist_work *w) {
    if (!w) return;
    if (dist__state.initialized && !dist__state.eng->release(w)) {
        dist__free(w); /* its buffers stay alive: the engine may still write them */
        return;
    }
    cn_release(w->user);
    cn_release(w->out);
    cn_release(w->in);
    dist__free(w);
}

/* Builds the work of a checked collective and starts it on the engine. */
static cn_dist_work *start(const char *op, dist_kind kind, cn_dist_op how, int root,
                           cn_tensor *out, cn_tensor *in, int halving) {
    cn_dist_work *w = dist__calloc(op, 1, sizeof *w);
    if (!w) return NULL;
    w->kind = kind;
    w->halving = halving;
    w->op = how;
    w->root = root;
    w->req = MPI_REQUEST_NULL;
    w->dtype = cn_dtype_of(out);
    w->user = cn_retain(out);
    cn_no_grad_begin(); /* the dense copies are plain data */
    w->out = dense(out);
    w->in = in ? dense(in) : NULL;
    cn_no_grad_end();
    w->count = kind == DIST_ALL_GATHER ? cn_numel(in) : cn_numel(out);
    if (!w->out || (in && !w->in)) {
        work_free(w);
        return NULL;
    }
    if (dist__state.eng->start(w) != CN_OK) {
        work_free(w);
        return NULL;
    }
    return w;
}

/* The front-end of the four tensor collectives: local checks, the agreement step (joined even
 * when the local checks failed, so that the other ranks fail too instead of waiting), then the
 * engine. */
static cn_dist_work *collective(const char *op, dist_kind kind, cn_dist_op how, int root,
                                cn_tensor *out, cn_tensor *in) {
    if (dist__check_group(op) != CN_OK) return NULL;
    const int world = dist__state.world;
    cn_status s = check_tensor(op, kind == DIST_ALL_REDUCE || kind == DIST_BROADCAST ? "t" : "out",
                               out, 1);
    if (s == CN_OK && (kind == DIST_REDUCE_SCATTER || kind == DIST_ALL_GATHER))
        s = check_tensor(op, "in", in, 0);
    if (s == CN_OK && (kind == DIST_ALL_REDUCE || kind == DIST_REDUCE_SCATTER))
        s = check_reduction(op, kind == DIST_ALL_REDUCE ? out : in, how);
    if (s == CN_OK && kind == DIST_BROADCAST && (root < 0 || root >= world))
        s = cn_set_error(CN_ERR_INVALID_ARG, op, "root = %d, but the world has %d ranks; give "
                         "0 to %d", root, world, world - 1);
    char a[128], b[128];
    if (s == CN_OK && in && cn_dtype_of(in) != cn_dtype_of(out))
        s = cn_set_error(CN_ERR_DTYPE, op, "'out' %s and 'in' %s differ in dtype; give them "
                         "one dtype", cn_tensor_str(out, a, sizeof a),
                         cn_tensor_str(in, b, sizeof b));
    if (s == CN_OK && in) {
        const cn_tensor *part = kind == DIST_ALL_GATHER ? in : out;
        const cn_tensor *whole = kind == DIST_ALL_GATHER ? out : in;
        int64_t need;
        if (__builtin_mul_overflow(cn_numel(part), (int64_t)world, &need))
            s = cn_set_error(CN_ERR_OVERFLOW, op, "%lld elements times %d ranks overflow",
                             (long long)cn_numel(part), world);
        else if (cn_numel(whole) != need)
            s = cn_set_error(CN_ERR_SHAPE, op, "'%s' %s must hold world size (%d) times the "
                             "elements of '%s' %s, %lld, but holds %lld; size it [%d, ...%s's "
                             "shape]", kind == DIST_ALL_GATHER ? "out" : "in",
                             cn_tensor_str(whole, a, sizeof a), world,
                             kind == DIST_ALL_GATHER ? "in" : "out",
                             cn_tensor_str(part, b, sizeof b), (long long)need,
                             (long long)cn_numel(whole), world,
                             kind == DIST_ALL_GATHER ? "in" : "out");
    }
    int64_t desc[DESC_LEN] = {0};
    if (s == CN_OK) {
        desc[0] = kind;
        desc[1] = cn_dtype_of(out);
        desc[2] = kind == DIST_ALL_REDUCE || kind == DIST_REDUCE_SCATTER ? how : 0;
        desc[3] = kind == DIST_BROADCAST ? root : 0;
        desc_shape(desc + DESC_IN, in);
        desc_shape(desc + DESC_OUT, out);
    } else {
        desc[0] = -(int64_t)s;
    }
    cn_status own = s;
    s = dist__agree(op, desc, DESC_LEN, describe_collective);
    if (s != CN_OK || own != CN_OK) return NULL;
    return start(op, kind, how, root, out, in, 0);
}

cn_dist_work *dist__all_reduce_unchecked(const char *op, cn_tensor *t, cn_dist_op how) {
    if (dist__check_group(op) != CN_OK) return NULL;
    return start(op, DIST_ALL_REDUCE, how, 0, t, NULL, 1);
}

cn_dist_work *cn_dist_all_reduce_async(cn_tensor *t, cn_dist_op op) {
    return collective("dist_all_reduce", DIST_ALL_REDUCE, op, 0, t, NULL);
}

cn_dist_work *cn_dist_broadcast_async(cn_tensor *t, int root) {
    return collective("dist_broadcast", DIST_BROADCAST, CN_DIST_SUM, root, t, NULL);
}

cn_dist_work *cn_dist_reduce_scatter_async(cn_tensor *out, cn_tensor *in, cn_dist_op op) {
    return collective("dist_reduce_scatter", DIST_REDUCE_SCATTER, op, 0, out, in);
}

cn_dist_work *cn_dist_all_gather_async(cn_tensor *out, cn_tensor *in) {
    return collective("dist_all_gather", DIST_ALL_GATHER, CN_DIST_SUM, 0, out, in);
}

/* ---- waiting --------------------------------------------------------------------------------- */

cn_status dist__wait(const char *op, cn_dist_work *w) {
    cn_status s = CN_OK;
    const double started = dist__now(), deadline = started + dist__timeout();
    while (!w->done) {
        if (dist__state.eng->test(w)) break;
        if (dist__now() > deadline) {
            s = cn_set_error(CN_ERR_BACKEND, op, "a %s joined by every rank did not complete "
                             "within %g s on rank %d: a rank failed or stopped during it; end "
                             "the job (cn_dist_abort), or raise the timeout "
                             "(cn_dist_set_timeout)", kind_name(w->kind), dist__timeout(),
                             dist__state.rank);
            dist__break("a collective timed out");
            if (dist__state.eng->abort) dist__state.eng->abort();
            break;
        }
        dist__pause(started);
    }
    if (s == CN_OK) s = w->status;
    if (s == CN_OK && w->out != w->user) {
        cn_no_grad_begin();
        s = cn_copy_(w->user, w->out);
        cn_no_grad_end();
    }
    work_free(w);
    return s;
}

cn_status cn_dist_wait(cn_dist_work *w) {
    if (!w) {
        dist__null_arg("dist_wait", "w");
        return cn_last_status();
    }
    if (!dist__state.initialized) {
        work_free(w);
        return dist__check_group("dist_wait");
    }
    return dist__wait("dist_wait", w);
}

int cn_dist_test(cn_dist_work *w) {
    if (!w || !dist__state.initialized) return 0;
    return w->done || dist__state.eng->test(w);
}

void dist__progress(cn_dist_work *const *works, int n) {
    for (int i = 0; i < n; i++)
        if (works[i] && !works[i]->done) dist__state.eng->test(works[i]);
}

static cn_status finish(const char *op, cn_dist_work *w) {
    return w ? dist__wait(op, w) : cn_last_status();
}

cn_status cn_dist_all_reduce(cn_tensor *t, cn_dist_op op) {
    return finish("dist_all_reduce", cn_dist_all_reduce_async(t, op));
}

cn_status cn_dist_broadcast(cn_tensor *t, int root) {
    return finish("dist_broadcast", cn_dist_broadcast_async(t, root));
}

cn_status cn_dist_reduce_scatter(cn_tensor *out, cn_tensor *in, cn_dist_op op) {
    return finish("dist_reduce_scatter", cn_dist_reduce_scatter_async(out, in, op));
}

cn_status cn_dist_all_gather(cn_tensor *out, cn_tensor *in) {
    return finish("dist_all_gather", cn_dist_all_gather_async(out, in));
}

/* ---- barrier and scalars: always over MPI ---------------------------------------------------- */

static cn_status mpi_wait_req(const char *op, const char *what, MPI_Request *req) {
    int rc;
    if (poll_until(req, 1, dist__now() + dist__timeout(), &rc) >= 0) {
        dist__break("a collective timed out");
        return cn_set_error(CN_ERR_BACKEND, op, "%s did not complete within %g s on rank %d: a "
                            "rank failed or stopped; end the job (cn_dist_abort)", what,
                            dist__timeout(), dist__state.rank);
    }
    if (rc != MPI_SUCCESS) {
        dist__break("an MPI error");
        return dist__mpi_error(op, what, rc);
    }
    return CN_OK;
}

cn_status cn_dist_barrier(void) {
    const char *op = "dist_barrier";
    if (dist__check_group(op) != CN_OK) return cn_last_status();
    int64_t desc[DESC_LEN] = {DIST_BARRIER};
    if (dist__agree(op, desc, DESC_LEN, describe_collective) != CN_OK) return cn_last_status();
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(dist__state.comm, &req);
    if (rc != MPI_SUCCESS) return dist__mpi_error(op, "MPI_Ibarrier", rc);
    return mpi_wait_req(op, "MPI_Ibarrier", &req);
}

cn_status cn_dist_reduce_scalar(double *value, cn_dist_op how) {
    const char *op = "dist_reduce_scalar";
    if (dist__check_group(op) != CN_OK) return cn_last_status();
    cn_status s = CN_OK;
    if (!value) {
        dist__null_arg(op, "value");
        s = cn_last_status();
    } else if ((int)how < CN_DIST_SUM || (int)how > CN_DIST_MIN) {
        s = cn_set_error(CN_ERR_INVALID_ARG, op, "op = %d; give CN_DIST_SUM, CN_DIST_MEAN, "
                         "CN_DIST_MAX or CN_DIST_MIN", (int)how);
    }
    int64_t desc[DESC_LEN] = {s == CN_OK ? DIST_SCALAR : -(int64_t)s, CN_F64, how};
    cn_status agreed = dist__agree(op, desc, DESC_LEN, describe_collective);
    if (s != CN_OK || agreed != CN_OK) return cn_last_status();
    MPI_Op mop = how == CN_DIST_MAX ? MPI_MAX : how == CN_DIST_MIN ? MPI_MIN : MPI_SUM;
    double v = *value;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, mop, dist__state.comm, &req);
    if (rc != MPI_SUCCESS) return dist__mpi_error(op, "MPI_Iallreduce", rc);
    if (mpi_wait_req(op, "MPI_Iallreduce", &req) != CN_OK) return cn_last_status();
    *value = how == CN_DIST_MEAN ? v / dist__state.world : v;
    return CN_OK;
}
