/* The front end of the fused optimizer kernels (cinder/ops.h, "fused optimizer updates"): the
 * router's checks for an in-place update of several tensors, then one kernel call. */
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/router.h"

/* Every check of cn_sgd_step_check; on CN_OK, *backend and *device are where to launch. */
static cn_status sgd_check(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn_sgd_hyper *h,
                           const cn_backend **backend, cn_device *device) {
    const char *op = "sgd_step";
    if (!h) return cn_set_error(CN_ERR_NULL_ARG, op, "'h' is NULL; pass the hyperparameters");
    int n = buf ? 3 : 2;
    cn_tensor *in[3] = {p, g, buf};
    const char *names[3] = {"p", "g", "buf"};
    const cn_backend *b = cn__route(op, in, names, n, device);
    if (!b) return cn_last_status();
    if ((h->momentum != 0) != (buf != NULL))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "momentum = %g but 'buf' is %s; pass a momentum buffer exactly when "
                            "momentum != 0",
                            h->momentum, buf ? "given" : "NULL");
    char x[128], y[128];
    for (int i = 0; i < n; i++) {
        if (in[i]->device.autodiff)
            return cn_set_error(CN_ERR_AUTODIFF_REACHED_CONCRETE, op,
                                "'%s' is %s, on an autodiff device; the in-place update works on "
                                "concrete tensors: pass cn_inner(%s), under no-grad mode",
                                names[i], cn_tensor_str(in[i], x, sizeof x), names[i]);
        cn_status s = cn__check_kind(op, names[i], in[i], CN_KINDS_FLOAT);
        if (s == CN_OK && i > 0) s = cn__check_same_dtype(op, "p", p, names[i], in[i]);
        if (s != CN_OK) return s;
        if (in[i]->ndim != p->ndim ||
            memcmp(in[i]->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) != 0)
            return cn_set_error(CN_ERR_SHAPE, op,
                                "'%s' is %s but 'p' is %s; a gradient and a momentum buffer have "
                                "their parameter's shape (no broadcasting): reduce or reshape "
                                "'%s' first",
                                names[i], cn_tensor_str(in[i], x, sizeof x),
                                cn_tensor_str(p, y, sizeof y), names[i]);
    }
    for (int i = 0; i < n; i += 2) /* p and buf are written */
        if (cn__overlaps_itself(in[i]))
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
    if ((p->dtype != CN_F32 && p->dtype != CN_F64) || !b->kernels[CN_OP_SGD_STEP])
        return CN_SGD_UNFUSED;
    *backend = b;
    return CN_OK;
}

cn_status cn_sgd_step_check(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn_sgd_hyper *h) {
    const cn_backend *b;
    cn_device dev;
    return sgd_check(p, g, buf, h, &b, &dev);
}

cn_status cn_sgd_step_(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn_sgd_hyper *h,
                       int first) {
    const cn_backend *b;
    cn_device dev;
    cn_status s = sgd_check(p, g, buf, h, &b, &dev);
    if (s != CN_OK) return s;
    cn_view in[3], out[2];
    cn__tensor_as_view(p, &in[0]);
    cn__tensor_as_view(g, &in[1]);
    out[0] = in[0]; /* in place: the outputs are the inputs' memory */
    if (buf) {
        cn__tensor_as_view(buf, &in[2]);
        out[1] = in[2];
    }
    const double reals[4] = {h->lr, h->momentum, h->dampening, h->weight_decay};
    const int64_t ints[2] = {h->nesterov != 0, first != 0};
    int n_in = buf ? 3 : 2;
    s = cn__launch_views(b, dev, CN_OP_SGD_STEP, in, n_in, out, n_in - 1, ints, 2, reals, 4);
    if (s != CN_OK) return s;
    p->storage->version++; /* as cn__launch does for its outputs: saved copies are now stale */
    if (buf) buf->storage->version++;
    return CN_OK;
}
