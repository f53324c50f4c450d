/* Fused optimizer updates: internal entry points for src/nn/optim.c. Not public API: an in-place
 * update that bypasses autodiff is safe only where the optimizer calls it (concrete tensors,
 * every check done before the first parameter is written). */
#ifndef CINDER_DISPATCH_OPTIM_OPS_H
#define CINDER_DISPATCH_OPTIM_OPS_H

#include "cinder/error.h"
#include "cinder/tensor.h"

/* Not a status code (no error is set with it): the backend has no fused kernel for this update,
 * so the caller computes it with composed ops instead. */
#define CN__UNFUSED ((cn_status)CN_STATUS_COUNT)

/* torch.optim.SGD's hyperparameters (nn.h, cn_sgd_new). */
typedef struct cn__sgd_hyper {
    double lr, momentum, dampening, weight_decay;
    int nesterov;
} cn__sgd_hyper;

/* Checks one SGD update without writing anything. p, g, buf: concrete tensors (not on an
 * autodiff device) of one shape, one float dtype and one device; buf is the momentum buffer,
 * present exactly when h->momentum != 0 (NULL otherwise). p and buf must not overlap themselves
 * (no stride 0 over a dim of size > 1), and none of the three may share memory with another.
 * Returns CN_OK when cn__sgd_step would run the backend's kernel; CN__UNFUSED when the backend
 * has no sgd_step kernel or the dtype is not f32/f64; otherwise the error (set, naming
 * "sgd_step", the argument and a way out). */
cn_status cn__sgd_step_check(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn__sgd_hyper *h);

/* One SGD update of p (and buf) in place, in one pass (CN_OP_SGD_STEP, cinder/backend.h):
 *     g' = g + weight_decay * p
 *     buf = first ? g' : momentum * buf + (1 - dampening) * g'       (when buf)
 *     p = p - lr * (buf ? (nesterov ? g' + momentum * buf : buf) : g')
 * first: buf holds nothing yet (its old contents are not read). Bumps the version counters of
 * p's and buf's storage, so autodiff sees the write. Returns what cn__sgd_step_check returns
 * (CN__UNFUSED and errors leave everything untouched), or the kernel's error. */
cn_status cn__sgd_step(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn__sgd_hyper *h,
                       int first);

/* Non-zero when a and b are views of the same memory (the same storage). */
int cn__shares_memory(const cn_tensor *a, const cn_tensor *b);

#endif
