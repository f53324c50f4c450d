/* The router's shared checks and the launch into a backend kernel. */
#include <string.h>

#include "core/error_internal.h"
#include "dispatch/registry.h"
#include "dispatch/router.h"

static const char *const kind_names[CN_KIND_COUNT] = {"float", "int", "bool", "quantized"};

static const char *mask_str(unsigned mask) {
    switch (mask) {
    case CN_KINDS_FLOAT: return "float";
    case CN_KINDS_INT: return "int";
    case CN_KINDS_BOOL: return "bool";
    case CN_KINDS_NUMERIC: return "float or int";
    default: return "float, int or bool";
    }
}

/* Two devices are compatible when they share the concrete backend and index; an autodiff device
 * and its plain inner device mix (the plain tensor is a constant), unless two autodiff devices
 * disagree on checkpointing. */
static int compatible(cn_device a, cn_device b) {
    if (a.backend != b.backend || a.index != b.index) return 0;
    return !(a.autodiff && b.autodiff && a.checkpoint != b.checkpoint);
}

/* The message for a tensor that fails cn__context_ok. */
cn_status cn__check_context(const char *op, const char *arg, const cn_tensor *t) {
    char buf[128];
    if (t->autograd && cn__dtype_kind(t->dtype) != CN_KIND_FLOAT)
        return cn_set_error(CN_ERR_AUTODIFF_NONFLOAT, op, "'%s' is %s but carries a graph node; "
                            "pass an int/bool tensor made by cinder's ops (cn_cast drops "
                            "tracking), and check the argument order", arg,
                            cn_tensor_str(t, buf, sizeof buf));
    if (!t->device.autodiff && t->device.checkpoint)
        return cn_set_error(CN_ERR_AUTODIFF_PLAIN_ENABLED, op, "'%s' is %s: a plain tensor whose "
                            "device has checkpointing set without the autodiff flag; build "
                            "devices with cn_autodiff_checkpointed(inner, strategy) or use "
                            "cn_inner_device(d)", arg, cn_tensor_str(t, buf, sizeof buf));
    return CN_OK;
}

/* The device mismatch between inputs lead and i, as an error. */
static void mismatch(const char *op, cn_tensor *const *in, const char *const *names, int lead,
                     int i) {
    char a[128], b[128];
    if (in[i]->device.backend == in[lead]->device.backend &&
        in[i]->device.index == in[lead]->device.index)
        cn_set_error(CN_ERR_CHECKPOINT_MISMATCH, op, "'%s' is %s but '%s' is %s; create both "
                     "on one autodiff device (one checkpointing strategy per graph)",
                     names[lead], cn_tensor_str(in[lead], a, sizeof a), names[i],
                     cn_tensor_str(in[i], b, sizeof b));
    else
        cn_set_error(CN_ERR_DEVICE_MISMATCH, op, "'%s' is %s but '%s' is %s; move one with "
                     "cn_to_device(t, device) so both live on one device", names[lead],
                     cn_tensor_str(in[lead], a, sizeof a), names[i],
                     cn_tensor_str(in[i], b, sizeof b));
}

const cn_backend *cn__route(const char *op, cn_tensor *const *in, const char *const *names, int n,
                            cn_device *device) {
    int lead = -1; /* the input whose device the result takes: the first autodiff one, if any */
    for (int i = 0; i < n; i++) {
        if (!in[i]) {
            cn__null_arg(op, names[i]);
            return NULL;
        }
        CN__CHECK_LIVE(op, in[i]);
        if (lead < 0 && in[i]->device.autodiff) lead = i;
    }
    if (lead < 0) lead = 0;
    for (int i = 0; i < n; i++) {
        const cn_tensor *t = in[i];
        /* both context rules at once; the message comes from cn__check_context */
        if ((t->autograd && cn__dtype_kind(t->dtype) != CN_KIND_FLOAT) ||
            (!t->device.autodiff && t->device.checkpoint)) {
            cn__check_context(op, names[i], t);
            return NULL;
        }
        if (!compatible(t->device, in[lead]->device)) {
            mismatch(op, in, names, lead, i);
            return NULL;
        }
    }
    *device = in[lead]->device;
    cn_device concrete = *device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    return cn__backend_for_device(op, concrete);
}

cn_status cn__kind_error(const char *op, const char *arg, const cn_tensor *t, unsigned mask) {
    cn_kind k = cn__dtype_kind(t->dtype);
    char buf[128];
    return cn_set_error(CN_ERR_KIND, op, "'%s' is %s, of kind %s, but %s takes %s tensors; "
                        "convert it first, e.g. cn_cast(%s, %s)", arg,
                        cn_tensor_str(t, buf, sizeof buf), kind_names[k], op, mask_str(mask), arg,
                        mask & CN_KINDS_FLOAT ? "CN_F32" : mask & CN_KINDS_INT ? "CN_I64"
                                                                               : "CN_BOOL");
}

cn_status cn__check_same_dtype(const char *op, const char *an, const cn_tensor *a, const char *bn,
                               const cn_tensor *b) {
    if (a->dtype == b->dtype) return CN_OK;
    char x[128], y[128];
    return cn_set_error(CN_ERR_DTYPE, op, "'%s' is %s but '%s' is %s; cinder does not promote "
                        "dtypes silently: cast one, e.g. cn_cast(%s, %s)", an,
                        cn_tensor_str(a, x, sizeof x), bn, cn_tensor_str(b, y, sizeof y), bn,
                        a->dtype == CN_F64 ? "CN_F64" : a->dtype == CN_F32 ? "CN_F32"
                                                                             : "<a's dtype>");
}

cn_status cn__broadcast_shapes(const char *op, const char *an, const cn_tensor *a, const char *bn,
                               const cn_tensor *b, int64_t *out, int *out_ndim) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int da = a->ndim - nd + i, db = b->ndim - nd + i;
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char x[128], y[128];
            return cn_set_error(CN_ERR_SHAPE, op, "'%s' %s and '%s' %s do not broadcast (dim %d: "
                                "%lld vs %lld); make the sizes equal or 1, e.g. with cn_reshape "
                                "or cn_unsqueeze", an, cn_tensor_str(a, x, sizeof x), bn,
                                cn_tensor_str(b, y, sizeof y), i - nd, (long long)sa,
                                (long long)sb);
        }
        out[i] = sa == 1 ? sb : sa;
    }
    *out_ndim = nd;
    return CN_OK;
}

void cn__broadcast_view(const cn_tensor *t, const int64_t *shape, int ndim, cn_view *v) {
    v->data = (char *)t->storage->data + t->offset * (int64_t)cn__dtype_size(t->dtype);
    v->dtype = t->dtype;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        int d = t->ndim - ndim + i;
        v->shape[i] = shape[i];
        v->strides[i] = (d >= 0 && t->shape[d] == shape[i]) ? t->strides[d] : 0;
    }
}

cn_status cn__no_kernel(const cn_backend *b, cn_op op) {
    return cn_set_error(CN_ERR_NO_KERNEL, cn_op_name(op), "backend '%s' has no kernel for '%s'; "
                        "move the inputs to a backend that has one (cn_to_device, e.g. to "
                        "cn_cpu()) or add the kernel to the backend's table", b->name,
                        cn_op_name(op));
}

cn_status cn__launch(const cn_backend *b, cn_device device, cn_op op, const cn_view *in, int n_in,
                     cn_tensor *const *out, int n_out, const int64_t *ints, int n_ints,
                     const double *reals, int n_reals) {
    cn_view views[4]; /* kernels read dims below ndim only */
    for (int i = 0; i < n_out; i++) cn__tensor_as_view(out[i], &views[i]);
    cn_status s = cn__launch_views(b, device, op, in, n_in, views, n_out, ints, n_ints, reals,
                                   n_reals);
    if (s == CN_OK)
        for (int i = 0; i < n_out; i++) out[i]->storage->version++;
    return s;
}

cn_status cn__copy_into(cn_tensor *dst, const cn_view *dst_view, cn_tensor *src) {
    cn_device dev;
    cn_tensor *pair[2] = {dst, src};
    const char *names[2] = {"dst", "src"};
    const cn_backend *b = cn__route("copy", pair, names, 2, &dev);
    if (!b) return cn_last_status();
    cn_view sv;
    cn__broadcast_view(src, dst_view->shape, dst_view->ndim, &sv);
    cn_status s = cn__launch_views(b, dev, src->dtype == dst->dtype ? CN_OP_COPY : CN_OP_CAST,
                                   &sv, 1, dst_view, 1, NULL, 0, NULL, 0);
    if (s == CN_OK) dst->storage->version++;
    return s;
}
