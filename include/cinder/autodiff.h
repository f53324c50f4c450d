/* cinder: reverse-mode automatic differentiation.
 *
 * Autodiff is a layer above the backends: an autodiff device wraps a concrete one, and float
 * tensors on it record the operations applied to them so that cn_backward can compute gradients.
 * The numbers are always computed by the concrete backend underneath; backends know nothing of it.
 *
 *     cn_device dev = cn_autodiff(cn_cpu());
 *     cn_tensor *w = cn_require_grad(cn_rand_normal(&gen, shape, 2, 0, 0.1, CN_F32, dev));
 *     cn_tensor *loss = cn_mean(cn_mul(cn_matmul(x, w), y));
 *     cn_grads *g = cn_backward(loss);
 *     cn_tensor *dw = cn_grad(g, w);          // borrowed: valid until cn_grads_free(g)
 *
 * Rules:
 * - Float tensors on an autodiff device are tracked when they require grad (cn_require_grad) or
 *   are computed from one that does. Int and bool tensors on it are never tracked but keep the
 *   autodiff device, so casting them back to float gives a float on the autodiff device.
 * - An op mixing an autodiff float and a plain float on the same backend treats the plain one as
 *   a constant. Tensors on different backends, or with different checkpointing strategies, are an
 *   error (CN_ERR_DEVICE_MISMATCH) that names both.
 * - Gradients of broadcast inputs are summed back to the input's shape.
 * - In-place writes (cn_copy_) to a tensor that a recorded op saved for backward make the later
 *   backward fail with CN_ERR_AUTODIFF_MODIFIED, never a wrong gradient. */
#ifndef CINDER_AUTODIFF_H
#define CINDER_AUTODIFF_H

#include "cinder/api.h"

#include "cinder/device.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cn_checkpoint {
    CN_CHECKPOINT_NONE = 0,     /* every op keeps what its backward needs */
    CN_CHECKPOINT_BALANCED = 1, /* memory-bound ops keep nothing and are recomputed in backward */
} cn_checkpoint;

/* The autodiff device over a concrete device, without checkpointing. */
CN_API cn_device cn_autodiff(cn_device inner);

/* The same with a checkpointing strategy. */
CN_API cn_device cn_autodiff_checkpointed(cn_device inner, cn_checkpoint strategy);

/* The concrete device under an autodiff device (the device itself if it is concrete). */
CN_API cn_device cn_inner_device(cn_device device);

/* Marks a float tensor on an autodiff device as a leaf that requires grad; returns t. Fails with
 * CN_ERR_KIND for int/bool tensors and CN_ERR_AUTODIFF_DEVICE for a tensor on a concrete device
 * (move it with cn_to_device(t, cn_autodiff(...)) first). A NULL t stays NULL. */
CN_API cn_tensor *cn_require_grad(cn_tensor *t);

/* Non-zero when t is tracked (a leaf requiring grad, or computed from one). */
CN_API int cn_requires_grad(const cn_tensor *t);

/* Keep the gradient of an intermediate (non-leaf) tensor in the cn_grads of the next backward,
 * like torch's retain_grad. Returns t. */
CN_API cn_tensor *cn_retain_grad(cn_tensor *t);

/* A new untracked tensor on the same device sharing t's data. */
CN_API cn_tensor *cn_detach(cn_tensor *t);

/* The concrete tensor under t, on the inner device, sharing its data ("strip the autodiff
 * wrapper"). For a concrete t, a new tensor sharing t's data. */
CN_API cn_tensor *cn_inner(cn_tensor *t);

/* The tensor t (concrete) seen on an autodiff device (untracked until cn_require_grad). */
CN_API cn_tensor *cn_from_inner(cn_tensor *t, cn_device autodiff_device);

/* ---- backward ------------------------------------------------------------------------------ */

typedef struct cn_grads cn_grads;

/* Computes the gradients of root with respect to every leaf that requires grad (and every
 * tensor marked with cn_retain_grad). A non-scalar root is seeded with ones (the gradient of
 * sum(root)). The graph behind root is freed as it is consumed: a second backward through it is
 * CN_ERR_AUTODIFF_GRAPH. Returns NULL with the error set on failure (nothing leaks then). */
CN_API cn_grads *cn_backward(cn_tensor *root);

/* The gradient of t (same shape, dtype and device as t, untracked), or NULL when t is not in the
 * graph (CN_ERR_AUTODIFF_NO_GRAD). Borrowed: valid until cn_grads_free or cn_grad_remove. */
CN_API cn_tensor *cn_grad(const cn_grads *grads, const cn_tensor *t);

/* Like cn_grad, but NULL without setting an error when t has no gradient in grads. */
CN_API cn_tensor *cn_grad_find(const cn_grads *grads, const cn_tensor *t);

/* Takes t's gradient out of the container: the caller owns the returned reference. */
CN_API cn_tensor *cn_grad_remove(cn_grads *grads, const cn_tensor *t);

CN_API void cn_grads_free(cn_grads *grads);

/* An empty container, for gradients computed elsewhere (an all-reduce, a sharded optimizer's
 * reduce-scatter) that cn_optimizer_step should read. NULL with CN_ERR_OUT_OF_MEMORY. */
CN_API cn_grads *cn_grads_new(void);

/* Sets t's gradient in grads to a copy of grad (dense, memory of its own, untracked), replacing
 * the one it had; cn_grad(grads, t) then returns it. t must be tracked (a leaf that requires
 * grad, or computed from one); grad must have t's shape and dtype and live on t's concrete
 * device. Errors: CN_ERR_NULL_ARG, CN_ERR_AUTODIFF_NO_GRAD (t not tracked), CN_ERR_SHAPE,
 * CN_ERR_DTYPE, CN_ERR_DEVICE_MISMATCH, CN_ERR_OUT_OF_MEMORY; grads unchanged on failure. */
CN_API cn_status cn_grads_set(cn_grads *grads, const cn_tensor *t, cn_tensor *grad);

/* ---- gradient-ready hooks ---------------------------------------------------------------------- */

/* Called by cn_backward when the gradient of a leaf is final: every node that feeds it has run,
 * so nothing will be added to it in this backward (PyTorch's post-accumulate-grad hook). `grad`
 * is the leaf's gradient as the cn_grads being built will hold it (dense, memory of its own,
 * untracked, on the leaf's concrete device), borrowed for the call; the hook may read it (copy it
 * into a communication buffer, start a collective) and, in no-grad mode as it runs, write it in
 * place. Anything it makes lives in the backward's own scope unless it takes it out. It runs on
 * the thread running cn_backward, between two nodes' formulas, once per backward that reaches
 * the leaf (never for a leaf the root does not depend on). A status other than CN_OK fails that
 * backward with that status (set the error with cn_set_error), and the graph stays usable. */
typedef cn_status (*cn_grad_ready_fn)(cn_tensor *grad, void *ctx);

/* Sets (fn non-NULL) or removes (fn NULL) leaf t's gradient-ready hook; one per leaf, a new one
 * replaces the old. The hook is kept by t's graph node, so it lasts as long as t stays the same
 * leaf. Errors: CN_ERR_NULL_ARG (t), CN_ERR_AUTODIFF_NO_GRAD (t is not a leaf that requires
 * grad: call cn_require_grad first; intermediates have no final gradient to hook). */
CN_API cn_status cn_set_grad_ready_hook(cn_tensor *t, cn_grad_ready_fn fn, void *ctx);

/* ---- no-grad mode ---------------------------------------------------------------------------- */

/* While no-grad mode is on (per thread, nestable), ops record nothing: their outputs are
 * untracked. For evaluation and optimizer steps. */
CN_API void cn_no_grad_begin(void);
CN_API void cn_no_grad_end(void);
CN_API int cn_grad_enabled(void);

/* ---- in-place ------------------------------------------------------------------------------ */

/* Writes src (broadcast to dst's shape, converted to dst's dtype) into dst's memory. Allowed on
 * tracked tensors only in no-grad mode (CN_ERR_AUTODIFF_INPLACE otherwise). Bumps dst's version,
 * so a backward that needs dst's old value fails instead of using the new one.
 * Overlap: src may share memory with dst (cn_copy_(a, cn_transpose(a, 0, 1))); the result is as
 * if all of src were read before the first write (it is copied through a temporary when the
 * two overlap other than element for element). A dst whose elements share memory (expanded:
 * stride 0) is refused with CN_ERR_INVALID_ARG and nothing written, as PyTorch refuses it. */
CN_API cn_status cn_copy_(cn_tensor *dst, cn_tensor *src);

#ifdef __cplusplus
}
#endif
#endif
