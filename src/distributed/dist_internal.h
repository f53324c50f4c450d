/* The distributed layer's shared state: the process group, the work handles, and the table each
 * engine (MPI for host memory, NCCL for CUDA memory) fills. dist.c checks the arguments, agrees on
 * them with the other ranks and waits; an engine only starts and tests collectives on dense
 * buffers. */
#ifndef CINDER_DIST_INTERNAL_H
#define CINDER_DIST_INTERNAL_H

#include <mpi.h>
#include <pthread.h>

#include "cinder/distributed.h"

typedef enum dist_kind {
    DIST_ALL_REDUCE = 1,
    DIST_BROADCAST = 2,
    DIST_REDUCE_SCATTER = 3,
    DIST_ALL_GATHER = 4,
    DIST_BARRIER = 5,
    DIST_SCALAR = 6,
    DIST_DDP = 7, /* cn_ddp_new's agreement on the parameters */
} dist_kind;

struct cn_dist_work {
    dist_kind kind;
    cn_dist_op op;
    int root;
    cn_dtype dtype;
    cn_tensor *user;  /* the tensor the caller sees written (a reference) */
    cn_tensor *out;   /* dense buffer the engine writes: user itself, or a copy written back */
    cn_tensor *in;    /* dense buffer the engine reads (reduce_scatter, all_gather), or NULL */
    int64_t count;    /* elements the engine moves per rank: out's (all_reduce, broadcast,
                         reduce_scatter), in's (all_gather) */
    int halving;      /* a cn_ddp bucket's all-reduce: the MPI engine may choose Rabenseifner's
                         algorithm for it (dist__mpi_prefer_halving) */
    int done;
    cn_status status; /* of the engine, once done */
    MPI_Request req;  /* MPI engine */
    void *event;      /* NCCL engine: a cudaEvent_t recorded after the call */
};

typedef struct dist_engine {
    const char *name;
    /* non-zero when tensors on this (concrete) device can be used by the engine */
    int (*device_ok)(cn_device d);
    /* starts w's collective on its dense buffers; the error set on failure */
    cn_status (*start)(cn_dist_work *w);
    /* 1 when w is done (w->status then says how), 0 while it runs */
    int (*test)(cn_dist_work *w);
    /* frees what start made for w, done or not; 0 when the engine may still write w's buffers
     * (abandoned after a timeout), which must then be kept alive */
    int (*release)(cn_dist_work *w);
    /* after a timeout: makes the engine give up its work in flight (NCCL: ncclCommAbort) */
    void (*abort)(void);
    cn_status (*finalize)(void);
} dist_engine;

typedef struct dist_state {
    int initialized;
    cn_dist_engine engine;
    const dist_engine *eng;
    int rank, world, local_rank;
    MPI_Comm comm;     /* MPI_COMM_WORLD duplicated, with MPI_ERRORS_RETURN */
    int we_init_mpi;   /* cn_dist_init called MPI_Init_thread, so finalize ends MPI */
    pthread_t owner;   /* the thread that called cn_dist_init */
    cn_device device;  /* where the engine's tensors live */
    int broken;        /* a timeout or an engine error: every later collective fails */
    char broken_why[256];
} dist_state;

extern dist_state dist__state;

/* The timeout of waits, in seconds (cn_dist_set_timeout, CINDER_DIST_TIMEOUT, else 600). */
double dist__timeout(void);
/* Seconds on a monotonic clock. */
double dist__now(void);
/* Between two polls of a wait that began at `started` (yields, then sleeps after a second). */
void dist__pause(double started);

/* Sets CN_ERR_BACKEND from an MPI error code, naming the call. Returns CN_ERR_BACKEND. */
cn_status dist__mpi_error(const char *op, const char *call, int code);

/* The checks of every call: initialised, on the thread that initialised, not broken. */
cn_status dist__check_group(const char *op);

/* Marks the group broken with a reason (printed by the next calls' errors). */
void dist__break(const char *why);

/* Starts an all-reduce of the dense tensor t without the agreement step: for callers that agreed
 * on the layout once (cn_ddp's buckets, which it marks `halving`). NULL with the error set on
 * failure. */
cn_dist_work *dist__all_reduce_unchecked(const char *op, cn_tensor *t, cn_dist_op how);

/* The MPI engine: looks up, once per process, whether Open MPI's libnbc lets its all-reduce
 * algorithm be chosen (engine_mpi.c), so that the `halving` reductions use Rabenseifner's. It
 * starts the MPI tool interface, which costs about 0.2 s once: cn_ddp_new calls it, before
 * training, and nothing else does. */
void dist__mpi_prefer_halving(void);

/* The agreement step: every rank sends its descriptor (len int64s) to every other and compares
 * each with rank 0's. Fails on every rank alike when one differs (naming the first rank that
 * does, with `describe` writing a descriptor as text) or a rank refused its own arguments
 * (desc[0] < 0: -status), and with CN_ERR_BACKEND naming the ranks that did not join within the
 * timeout. `mine_status`: this rank's own failure, kept as its error. */
typedef void (*dist_describe_fn)(const int64_t *desc, char *buf, size_t size);
cn_status dist__agree(const char *op, const int64_t *desc, int len, dist_describe_fn describe);

/* Waits for w with the timeout, writes a non-contiguous result back, frees w. */
cn_status dist__wait(const char *op, cn_dist_work *w);

/* Tests every work handle of the process once, so MPI progresses while backward computes. */
void dist__progress(cn_dist_work *const *works, int n);

/* What cn_ddp_new and cn_zero_new do first: checks the parameters (float, tracked, on the
 * engine's device), agrees with the other ranks that they are the same (count, dtypes, shapes;
 * a rank that differs is named), and broadcasts rank 0's values. The error set on failure. */
cn_status dist__share_params(const char *op, const cn_param *params, int n);

/* ---- what the layer needs of libcinder, through its public API only -------------------------
 * The layer is built as a shared library over libcinder.so too (libcinder_distributed.so), which
 * exports its CN_API calls and nothing else, so it uses no internal helper of the core. */

/* calloc and free; on failure CN_ERR_OUT_OF_MEMORY naming op, and NULL. */
void *dist__calloc(const char *op, size_t count, size_t size);
void dist__free(void *p);

/* CN_ERR_NULL_ARG naming op and arg, unless an earlier error (the one that produced the NULL) is
 * set, which is kept. Returns the status set. */
cn_status dist__null_arg(const char *op, const char *arg);

/* Makes the caller the owner of t, a tensor just made (t NULL: NULL): an open scope keeps its
 * own reference and drops it at its end, the caller releases the one this adds. */
cn_tensor *dist__own(cn_tensor *t);

/* "[2, 3]" into buf. */
const char *dist__shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

extern const dist_engine dist__mpi_engine;
#ifdef CINDER_HAVE_NCCL
extern const dist_engine dist__nccl_engine;
cn_status dist__nccl_init(void);
#endif

#endif
