/* The front end of the fused optimizer kernels (cinder/ops.h, "fused optimizer updates"): the
 * router's checks for an in-place update of several tensors, then one kernel call. */
#include <math.h>
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/router.h"

/* The checks every in-place update shares: in[0] is the parameter; `written` flags the operands
 * the kernel writes. Routes them; on CN_OK *backend and *device are where to launch, or the
 * answer is CN_SGD_UNFUSED when the backend has no kernel `kernel` for their dtype. */
static cn_status inplace_check(const char *op, cn_op kernel, cn_tensor *const *in,
                               const char *const *names, int n, const int *written,
                               const cn_backend **backend, cn_device *device) {
    cn_tensor *p = in[0];
    const cn_backend *b = cn__route(op, in, names, n, device);
    if (!b) return cn_last_status();
    char x[128], y[128];
    for (int i = 0; i < n; i++) {
        if (in[i]->device.autodiff)
            return cn_set_error(CN_ERR_AUTODIFF_REACHED_CONCRETE, op,
                                "'%s' is %s, on an autodiff device; the in-place update works on "
                                "concrete tensors: pass cn_inner(%s), under no-grad mode",
                                names[i], cn_tensor_str(in[i], x, sizeof x), names[i]);
        cn_status s = cn__check_kind(op, names[i], in[i], CN_KINDS_FLOAT);
        if (s == CN_OK && i > 0) s = cn__check_same_dtype(op, names[0], p, names[i], in[i]);
        if (s != CN_OK) return s;
        if (in[i]->ndim != p->ndim ||
            memcmp(in[i]->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) != 0)
            return cn_set_error(CN_ERR_SHAPE, op,
                                "'%s' is %s but '%s' is %s; a gradient and an optimizer's state "
                                "have their parameter's shape (no broadcasting): reduce or "
                                "reshape '%s' first",
                                names[i], cn_tensor_str(in[i], x, sizeof x), names[0],
                                cn_tensor_str(p, y, sizeof y), names[i]);
    }
    for (int i = 0; i < n; i++)
        if (written[i] && cn__overlaps_itself(in[i]))
            return cn_set_error(CN_ERR_INVALID_ARG, op,
                                "'%s' is %s, whose elements share memory (stride 0); an in-place "
                                "update would apply several times: give it memory of its own "
                                "with cn_clone",
                                names[i], cn_tensor_str(in[i], x, sizeof x));
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (cn_shares_memory(in[i], in[j]))
                return cn_set_error(CN_ERR_INVALID_ARG, op,
                                    "'%s' and '%s' share memory; the update would read one while "
                                    "writing the other: pass a copy of one (cn_clone)",
                                    names[i], names[j]);
    if ((p->dtype != CN_F32 && p->dtype != CN_F64) || !b->kernels[kernel]) return CN_SGD_UNFUSED;
    *backend = b;
    return CN_OK;
}

/* Launches an in-place update that inplace_check passed: outputs are the written inputs' memory,
 * whose versions are bumped (as cn__launch does for its outputs: saved copies are now stale). */
static cn_status inplace_launch(const cn_backend *b, cn_device dev, cn_op kernel,
                                cn_tensor *const *in, int n, const int *written,
                                const int64_t *ints, int n_ints, const double *reals,
                                int n_reals) {
    cn_view views[4], outs[4];
    int n_out = 0;
    for (int i = 0; i < n; i++) {
        cn__tensor_as_view(in[i], &views[i]);
        if (written[i]) outs[n_out++] = views[i];
    }
    cn_status s = cn__launch_views(b, dev, kernel, views, n, outs, n_out, ints, n_ints, reals,
                                   n_reals);
    if (s != CN_OK) return s;
    for (int i = 0; i < n; i++)
        if (written[i]) in[i]->storage->version++;
    return CN_OK;
}

/* ---- SGD ------------------------------------------------------------------------------------- */

static const int sgd_written[3] = {1, 0, 1};

static cn_status sgd_check(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn_sgd_hyper *h,
                           const cn_backend **backend, cn_device *device) {
    const char *op = "sgd_step";
    if (!h) return cn_set_error(CN_ERR_NULL_ARG, op, "'h' is NULL; pass the hyperparameters");
    if ((h->momentum != 0) != (buf != NULL))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "momentum = %g but 'buf' is %s; pass a momentum buffer exactly when "
                            "momentum != 0",
                            h->momentum, buf ? "given" : "NULL");
    cn_tensor *in[3] = {p, g, buf};
    const char *names[3] = {"p", "g", "buf"};
    return inplace_check(op, CN_OP_SGD_STEP, in, names, buf ? 3 : 2, sgd_written, backend,
                         device);
}

cn_status cn_sgd_step_check(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn_sgd_hyper *h) {
    const cn_backend *b = NULL;
    cn_device dev;
    return sgd_check(p, g, buf, h, &b, &dev);
}

cn_status cn_sgd_step_(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn_sgd_hyper *h,
                       int first) {
    const cn_backend *b = NULL;
    cn_device dev;
    cn_status s = sgd_check(p, g, buf, h, &b, &dev);
    if (s != CN_OK) return s;
    cn_tensor *in[3] = {p, g, buf};
    const double reals[4] = {h->lr, h->momentum, h->dampening, h->weight_decay};
    const int64_t ints[2] = {h->nesterov != 0, first != 0};
    return inplace_launch(b, dev, CN_OP_SGD_STEP, in, buf ? 3 : 2, sgd_written, ints, 2, reals,
                          4);
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

static const int adamw_written[4] = {1, 0, 1, 1};

static cn_status adamw_check(cn_tensor *p, cn_tensor *g, cn_tensor *m, cn_tensor *v,
                             const cn_adamw_hyper *h, const cn_backend **backend,
                             cn_device *device) {
    const char *op = "adamw_step";
    if (!h) return cn_set_error(CN_ERR_NULL_ARG, op, "'h' is NULL; pass the hyperparameters");
    if (h->step < 1)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "h->step is %lld; it counts this update, from 1", (long long)h->step);
    const double hv[5] = {h->lr, h->beta1, h->beta2, h->eps, h->weight_decay};
    const char *hn[5] = {"lr", "beta1", "beta2", "eps", "weight_decay"};
    for (int i = 0; i < 5; i++)
        if (!isfinite(hv[i]))
            return cn_set_error(CN_ERR_INVALID_ARG, op, "h->%s is %g; give a finite value",
                                hn[i], hv[i]);
    cn_tensor *in[4] = {p, g, m, v};
    const char *names[4] = {"p", "g", "exp_avg", "exp_avg_sq"};
    return inplace_check(op, CN_OP_ADAMW_STEP, in, names, 4, adamw_written, backend, device);
}

cn_status cn_adamw_step_check(cn_tensor *p, cn_tensor *g, cn_tensor *exp_avg,
                              cn_tensor *exp_avg_sq, const cn_adamw_hyper *h) {
    const cn_backend *b = NULL;
    cn_device dev;
    return adamw_check(p, g, exp_avg, exp_avg_sq, h, &b, &dev);
}

cn_status cn_adamw_step_(cn_tensor *p, cn_tensor *g, cn_tensor *exp_avg, cn_tensor *exp_avg_sq,
                         const cn_adamw_hyper *h, int first) {
    const cn_backend *b = NULL;
    cn_device dev;
    cn_status s = adamw_check(p, g, exp_avg, exp_avg_sq, h, &b, &dev);
    if (s != CN_OK) return s;
    cn_tensor *in[4] = {p, g, exp_avg, exp_avg_sq};
    const double reals[5] = {h->lr, h->beta1, h->beta2, h->eps, h->weight_decay};
    const int64_t ints[2] = {h->step, first != 0};
    return inplace_launch(b, dev, CN_OP_ADAMW_STEP, in, 4, adamw_written, ints, 2, reals, 5);
}
