/* cinder: data-parallel training over MPI (CPU tensors) and NCCL (CUDA tensors).
 *
 * A program started by a launcher (`mpirun -np 4 ./train`, `srun`) calls cn_dist_init once on each
 * process (a "rank"), then the collectives below on every rank in the same order, then
 * cn_dist_finalize. The engines are the ones such programs already run on: Open MPI (or any MPI)
 * for tensors in host memory, NCCL for tensors on CUDA devices (one GPU per rank, chosen by the
 * rank's local rank on its node). cinder adds no transport of its own.
 *
 *     cn_dist_init(CN_DIST_MPI);
 *     cn_dist_all_reduce(t, CN_DIST_MEAN);          // every rank now holds the mean of all t
 *     cn_dist_work *w = cn_dist_all_reduce_async(g, CN_DIST_SUM);
 *     ... compute ...                               // the reduction proceeds meanwhile
 *     cn_dist_wait(w);                              // g holds the sum; w is freed
 *     cn_dist_finalize();
 *
 * Rules for every collective:
 * - Every rank calls the same collectives in the same order, on tensors of one dtype and shape
 *   (per role: see each call). Before it starts, each collective exchanges a small descriptor (the
 *   call, dtype, shapes, op, root) among all ranks: a rank whose descriptor differs fails the
 *   call on every rank with CN_ERR_SHAPE or CN_ERR_DTYPE naming that rank and both descriptors,
 *   instead of hanging or reducing unrelated memory. A rank that does not join within the
 *   timeout (cn_dist_set_timeout) fails it with CN_ERR_BACKEND naming the ranks that are missing.
 * - Tensors are written in place through their memory (cn_data_ptr). Any strides work (a
 *   non-contiguous tensor goes through a dense copy that is written back). A tensor tracked by
 *   autodiff may be used only in no-grad mode (CN_ERR_AUTODIFF_INPLACE otherwise), as for
 *   cn_copy_; the autodiff version counters do not see the write.
 * - Tensors must live on the engine's device: the CPU for CN_DIST_MPI, this rank's CUDA device
 *   (cn_dist_device) for CN_DIST_NCCL; any other is CN_ERR_DEVICE_MISMATCH. An autodiff device
 *   counts as the device it wraps.
 * - A call before cn_dist_init or after cn_dist_finalize is CN_ERR_DEVICE_UNAVAILABLE.
 * - Threads: call cn_dist_* only from the thread that called cn_dist_init (MPI is initialised
 *   with MPI_THREAD_FUNNELED); another thread gets CN_ERR_INVALID_ARG.
 * - Failures: an error of the engine (MPI, NCCL) is CN_ERR_BACKEND with the engine's message.
 *   After a timeout or an engine error the group is broken: every later collective fails at once
 *   with CN_ERR_BACKEND, and the program should end with cn_dist_abort. A rank that dies ends
 *   the job through the launcher (mpirun stops the other ranks and names the one that died).
 *
 * Built only when MPI was found (CMake: MPI_C); the NCCL engine only when the CUDA toolkit and
 * NCCL were found too (cn_dist_engine_compiled says which). Link cinder::distributed. */
#ifndef CINDER_DISTRIBUTED_H
#define CINDER_DISTRIBUTED_H

#include "cinder/api.h"

#include <stddef.h>

#include "cinder/autodiff.h"
#include "cinder/device.h"
#include "cinder/error.h"
#include "cinder/io.h"
#include "cinder/nn.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the process group ----------------------------------------------------------------------- */

typedef enum cn_dist_engine {
    CN_DIST_MPI = 0,  /* host memory: CPU tensors, over MPI's non-blocking collectives */
    CN_DIST_NCCL = 1, /* CUDA tensors, over NCCL on a stream of this rank's GPU */
} cn_dist_engine;

/* Non-zero when this build has the engine (MPI: always, when this header's library exists). */
CN_API int cn_dist_engine_compiled(cn_dist_engine engine);

/* Joins the job this process was launched in: initialises MPI (MPI_Init_thread, FUNNELED) unless
 * the program already did, duplicates MPI_COMM_WORLD with MPI_ERRORS_RETURN (errors come back as
 * statuses, never abort inside MPI), and reads the rank, the world size and the local rank (the
 * rank among the processes on this node, from MPI_Comm_split_type, whatever the launcher). A
 * process started without a launcher is a world of one. For CN_DIST_NCCL it also selects CUDA
 * device (local rank mod device count) and creates the NCCL communicator (its id broadcast over
 * MPI). Errors: CN_ERR_INVALID_ARG (not an engine; already initialised: finalize first),
 * CN_ERR_DEVICE_UNAVAILABLE (the engine is not compiled in, or no GPU for NCCL), CN_ERR_BACKEND
 * (MPI or NCCL failed, with their message). On failure nothing stays initialised by cinder. */
CN_API cn_status cn_dist_init(cn_dist_engine engine);

/* Leaves the group: waits for nothing (wait for your handles first), frees the communicators,
 * and finalizes MPI if cn_dist_init initialised it. CN_ERR_DEVICE_UNAVAILABLE when not
 * initialised; CN_ERR_BACKEND when MPI fails. */
CN_API cn_status cn_dist_finalize(void);

/* Ends the whole job now (MPI_Abort), after writing "cinder: rank R aborts the job: <why>" to
 * stderr, so that every rank stops, not only this one. For a rank that hit an error the others
 * cannot know of (they would wait for it until the timeout). Does not return. Works before
 * init too (then it only exits with `code`). */
CN_API void cn_dist_abort(int code, const char *why);

CN_API int cn_dist_is_initialized(void);
/* This process's rank (0 .. world size - 1), world size and rank on its node; 0, 1, 0 when not
 * initialised. */
CN_API int cn_dist_rank(void);
CN_API int cn_dist_world_size(void);
CN_API int cn_dist_local_rank(void);
/* The device collectives run on: the CPU for MPI, cuda:<local rank mod GPUs> for NCCL; the CPU
 * when not initialised. */
CN_API cn_device cn_dist_device(void);

/* How long (seconds, > 0) a rank waits for the others to join a collective, or for one to
 * complete, before failing it with CN_ERR_BACKEND; the default is the environment variable
 * CINDER_DIST_TIMEOUT, else 600. CN_ERR_INVALID_ARG for a value not > 0. Per process. */
CN_API cn_status cn_dist_set_timeout(double seconds);

/* ---- collectives ----------------------------------------------------------------------------- */

typedef enum cn_dist_op {
    CN_DIST_SUM = 0,
    CN_DIST_MEAN = 1, /* the sum divided by the world size; float dtypes only */
    CN_DIST_MAX = 2,
    CN_DIST_MIN = 3,
} cn_dist_op;

/* A collective in flight. Owned by the caller until cn_dist_wait frees it. */
typedef struct cn_dist_work cn_dist_work;

/* Waits until w's collective completed on this rank (its tensors then hold the result; before,
 * they must be neither read nor written), and frees w. Errors: CN_ERR_NULL_ARG, CN_ERR_BACKEND
 * (the engine failed, or it did not complete within the timeout: the group is then broken). w is
 * freed in every case. */
CN_API cn_status cn_dist_wait(cn_dist_work *w);

/* Non-zero when w has completed (cn_dist_wait then returns at once); drives MPI's progress. */
CN_API int cn_dist_test(cn_dist_work *w);

/* t (same shape and dtype on every rank) becomes, on every rank, the elementwise reduction of
 * all ranks' t. dtypes: f32, f64, i32, i64 for MPI (f16 and bf16 too for NCCL); MEAN: float
 * only (CN_ERR_DTYPE otherwise). The _async form returns a handle (NULL with the error set on
 * failure, t untouched); the plain form waits. */
CN_API cn_status cn_dist_all_reduce(cn_tensor *t, cn_dist_op op);
CN_API cn_dist_work *cn_dist_all_reduce_async(cn_tensor *t, cn_dist_op op);

/* t (same shape and dtype everywhere) becomes root's t on every rank. Any dtype.
 * CN_ERR_INVALID_ARG for a root outside 0 .. world size - 1. */
CN_API cn_status cn_dist_broadcast(cn_tensor *t, int root);
CN_API cn_dist_work *cn_dist_broadcast_async(cn_tensor *t, int root);

/* Reduces `in` over all ranks and leaves on rank r the r-th of world-size equal parts of the
 * result, in `out`: in holds world_size * numel(out) elements (in row-major order), of one dtype
 * with out (any shapes). CN_ERR_SHAPE when the counts disagree, CN_ERR_DTYPE as all_reduce. */
CN_API cn_status cn_dist_reduce_scatter(cn_tensor *out, cn_tensor *in, cn_dist_op op);
CN_API cn_dist_work *cn_dist_reduce_scatter_async(cn_tensor *out, cn_tensor *in, cn_dist_op op);

/* out = the concatenation, in rank order, of every rank's `in` (row-major): out holds
 * world_size * numel(in) elements, of in's dtype (any shapes; [world, ...in's shape] is usual).
 * Any dtype. CN_ERR_SHAPE when the counts disagree. */
CN_API cn_status cn_dist_all_gather(cn_tensor *out, cn_tensor *in);
CN_API cn_dist_work *cn_dist_all_gather_async(cn_tensor *out, cn_tensor *in);

/* Returns when every rank has entered it (within the timeout, else CN_ERR_BACKEND naming the
 * ranks missing). */
CN_API cn_status cn_dist_barrier(void);

/* The sum (or mean, max, min) of a double over all ranks, for metrics: *value is replaced on
 * every rank. Errors as cn_dist_all_reduce (CN_ERR_NULL_ARG for a NULL value). */
CN_API cn_status cn_dist_reduce_scalar(double *value, cn_dist_op op);

/* ---- data-parallel training ------------------------------------------------------------------ *
 *
 * cn_ddp keeps the replicas of a model in step, as PyTorch's DistributedDataParallel does:
 *
 *     cn_ddp *d = cn_ddp_new(params, n, 0);   // broadcasts rank 0's parameters
 *     for each step:
 *         loss = model(my shard of the batch);
 *         cn_grads *g = cn_backward(loss);    // buckets are all-reduced as their grads are done
 *         cn_ddp_sync(d, g);                  // waits; g now holds the mean gradient
 *         cn_optimizer_step(opt, g);
 *
 * The parameters are grouped into buckets of about bucket_bytes in reverse order (the order
 * backward reaches them). Each parameter gets a gradient-ready hook (cn_set_grad_ready_hook):
 * when cn_backward has the final gradient of every parameter of a bucket, the bucket's mean
 * over all ranks starts (non-blocking) while backward goes on with the layers below. Small
 * parameters share a bucket's buffer (their gradients are copied in, and the means copied back
 * by cn_ddp_sync); a large one is a bucket of its own, averaged in place in the gradient that
 * backward made, so a gradient in the step's cn_grads may be changing until cn_ddp_sync returns:
 * read them after it. Every rank
 * must build its cn_ddp over the same parameters (count, dtypes and shapes, in one order),
 * which cn_ddp_new checks. The mean gradient equals the gradient of the mean loss over the union
 * of the ranks' batches when every rank has a batch of one size (cn_batches_new_sharded). */

typedef struct cn_ddp cn_ddp;

/* Broadcasts each params[i].tensor from rank 0 (under no-grad mode), checks that every rank gave
 * the same parameters, makes the buckets, and sets a hook on each parameter. bucket_bytes 0: as
 * PyTorch, a first bucket of 1 MiB (so that a reduction starts early in backward), then 25 MiB;
 * and, over MPI, a parameter of 256 KiB or more is a bucket of its own, averaged in place (a
 * copy of it in host memory would cost more than one more collective's latency). bucket_bytes
 * > 0: buckets of that size, and a parameter of min(bucket_bytes, 256 KiB) or more alone. Over
 * NCCL only a parameter larger than a bucket is alone. Parameters must be leaves that
 * require grad (cn_require_grad), float, on the engine's device, and not already hooked. NULL
 * with the error set on failure (hooks removed). Errors: CN_ERR_NULL_ARG, CN_ERR_INVALID_ARG
 * (n < 1), CN_ERR_AUTODIFF_NO_GRAD (not a leaf that requires grad), CN_ERR_KIND, CN_ERR_SHAPE
 * (another rank's parameters differ: it is named), and the collectives' errors. */
CN_API cn_ddp *cn_ddp_new(const cn_param *params, int n, size_t bucket_bytes);

/* After cn_backward: starts the buckets that are still waiting (a parameter that got no gradient
 * in this backward counts as a zero gradient), waits for all, and writes each parameter's mean
 * gradient over the ranks into its gradient in `grads` (parameters without one there are left
 * out). grads NULL: only waits and forgets the step (after a failed backward). Every rank must
 * call it once per backward. Errors: the collectives', CN_ERR_BACKEND from a failure in one of
 * the hooks during backward (the hook's own error then also failed the backward). */
CN_API cn_status cn_ddp_sync(cn_ddp *d, cn_grads *grads);

/* The number of buckets (for tests and logs); 0 for NULL. */
CN_API int cn_ddp_bucket_count(const cn_ddp *d);

/* Buckets whose all-reduce has started in this step so far (until cn_ddp_sync starts the rest
 * and resets it): read between cn_backward and cn_ddp_sync, it says how many reductions backward
 * itself started, overlapping with its own computation (all of them when every parameter got a
 * gradient). 0 for NULL. */
CN_API int cn_ddp_started(const cn_ddp *d);

/* Removes the hooks and frees d (NULL-safe). Waits for collectives still in flight. */
CN_API void cn_ddp_free(cn_ddp *d);

/* ---- ZeRO-1: the optimizer's state sharded over the ranks --------------------------------- *
 *
 * As llm.c and DeepSpeed's stage 1: the parameters (all of one float dtype) are laid end to end
 * in one flat vector, padded with zeros to a multiple of the world size, and rank r owns the
 * r-th of its world-size equal parts (its shard). Each step reduce-scatters the gradients (rank
 * r receives the mean over the ranks of its part), updates its part with an optimizer that holds
 * state for that part alone (so momentum or Adam's two moments take 1/world of the memory), and
 * all-gathers the parts into every rank's parameters. Elementwise optimizers (SGD with momentum,
 * AdamW) then give the parameters of plain data-parallel training (cn_ddp + the same optimizer)
 * to rounding. Gradients are reduced after backward, not during it.
 *
 *     cn_optimizer *make(const cn_param *shard, int n, void *ctx) {
 *         return cn_adamw_new(shard, n, 1e-3, 0.9, 0.999, 1e-8, 0.01);
 *     }
 *     cn_zero *z = cn_zero_new(params, n, make, NULL);   // broadcasts rank 0's parameters
 *     for each step: g = cn_backward(loss); cn_zero_step(z, g); cn_grads_free(g);
 */

typedef struct cn_zero cn_zero;

/* Makes the optimizer of this rank's shard: called once by cn_zero_new with one parameter (the
 * shard, a 1-d tensor named "zero_shard" that requires grad); returns the optimizer (NULL with
 * the error set on failure), which cn_zero then owns. */
typedef cn_optimizer *(*cn_zero_make_optimizer)(const cn_param *shard, int n, void *ctx);

/* Broadcasts rank 0's parameters (as cn_ddp_new), checks that every rank gave the same ones,
 * and makes this rank's shard and its optimizer. Parameters: float, one dtype, on the engine's
 * device, tracked. NULL with the error set on failure. Errors: those of cn_ddp_new, CN_ERR_DTYPE
 * for parameters of several dtypes, CN_ERR_NULL_ARG for make, and make's. */
CN_API cn_zero *cn_zero_new(const cn_param *params, int n, cn_zero_make_optimizer make,
                            void *ctx);

/* One step after cn_backward: the mean gradient of this rank's shard (reduce-scatter; a
 * parameter without a gradient in grads counts as zeros), the shard's optimizer step, and the
 * new parameters on every rank (all-gather, copied into the parameters under no-grad mode).
 * Every rank calls it once per backward. On failure the parameters are as they were, unless the
 * all-gather itself failed (the group is then broken: end the job). */
CN_API cn_status cn_zero_step(cn_zero *z, const cn_grads *grads);

/* The shard's optimizer (to change its learning rate), and the elements of the shard. */
CN_API cn_optimizer *cn_zero_optimizer(cn_zero *z);
CN_API int64_t cn_zero_shard_numel(const cn_zero *z);

/* Frees z and its optimizer (NULL-safe); the parameters stay. */
CN_API void cn_zero_free(cn_zero *z);

#ifdef __cplusplus
}
#endif
#endif
