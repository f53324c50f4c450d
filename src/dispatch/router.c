/* The router's shared checks and the launch into a backend kernel. */
#include <stdio.h>
#include <string.h>

#include "core/error_internal.h"
#include "dispatch/registry.h"
#include "dispatch/router.h"

_Atomic(cn__record_fn) cn__record_layer;

void cn__register_record_layer(cn__record_fn fn) {
    atomic_store_explicit(&cn__record_layer, fn, memory_order_release);
}

_Atomic(cn__grad_mode_fn) cn__grad_mode_layer;

void cn__register_grad_mode_layer(cn__grad_mode_fn fn) {
    atomic_store_explicit(&cn__grad_mode_layer, fn, memory_order_release);
}

static const char *const kind_names[CN_KIND_COUNT] = {"float", "int", "bool", "quantized"};

static const char *mask_str(unsigned mask) {
    switch (mask) {
    case CN_KINDS_FLOAT: return "float";
    case CN_KINDS_INT: return "int";
    case CN_KINDS_BOOL: return "bool";
    case CN_KINDS_NUMERIC: return "float or int";
    case 1u << CN_KIND_QUANTIZED: return "quantized";
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

/* The checks of cn__route, input by input, with the message of the first that fails. */
static const cn_backend *route_checked(const char *op, cn_tensor *const *in,
                                       const char *const *names, int n, cn_device *device) {
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
        /* quantized tensors take only the quantized calls (cinder/quant.h), which route their
         * float inputs alone */
        if (cn__is_quant(t->dtype)) {
            cn__kind_error(op, names[i], t, CN_KINDS_ALL);
            return NULL;
        }
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

/* One pass for the usual case (every input present and well formed, all on one device, one
 * checkpointing strategy among the autodiff ones): equivalent to route_checked's rules, since
 * "same backend and index as input 0" is "same as the lead", and every autodiff input agreeing
 * with the first one is every pair agreeing. Anything else takes route_checked for its message. */
const cn_backend *cn__route(const char *op, cn_tensor *const *in, const char *const *names, int n,
                            cn_device *device) {
    int lead = -1;
    for (int i = 0; i < n; i++) {
        const cn_tensor *t = in[i];
        if (!t) return route_checked(op, in, names, n, device);
        CN__CHECK_LIVE(op, t);
        cn_device d = t->device;
        if ((t->autograd && cn__dtype_kind(t->dtype) != CN_KIND_FLOAT) ||
            cn__is_quant(t->dtype) ||
            (!d.autodiff && d.checkpoint) || d.backend != in[0]->device.backend ||
            d.index != in[0]->device.index ||
            (d.autodiff && lead >= 0 && d.checkpoint != in[lead]->device.checkpoint))
            return route_checked(op, in, names, n, device);
        if (d.autodiff && lead < 0) lead = i;
    }
    *device = in[lead < 0 ? 0 : lead]->device;
    cn_device concrete = *device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    return cn__backend_for_device(op, concrete);
}

cn_status cn__kind_error(const char *op, const char *arg, const cn_tensor *t, unsigned mask) {
    cn_kind k = cn__dtype_kind(t->dtype);
    char buf[128];
    if (k == CN_KIND_QUANTIZED)
        return cn_set_error(CN_ERR_KIND, op, "'%s' is %s, of kind quantized, but %s takes %s "
                            "tensors; dequantize it first, e.g. cn_dequantize(%s, CN_F32)", arg,
                            cn_tensor_str(t, buf, sizeof buf), op, mask_str(mask), arg);
    if (mask == 1u << CN_KIND_QUANTIZED)
        return cn_set_error(CN_ERR_KIND, op, "'%s' is %s, of kind %s, but %s takes quantized "
                            "tensors; quantize it first, e.g. cn_quantize(%s, CN_Q8_BLOCK)", arg,
                            cn_tensor_str(t, buf, sizeof buf), kind_names[k], op, arg);
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

cn_status cn__dtype_unsupported(const cn_backend *b, cn_op op, cn_dtype dtype) {
    char have[96] = "";
    size_t used = 0;
    for (int dt = 0; dt < CN_DTYPE_COUNT && used + 8 < sizeof have; dt++)
        if ((b->dtypes[op] >> dt) & 1u)
            used += (size_t)snprintf(have + used, sizeof have - used, "%s%s", used ? ", " : "",
                                     cn_dtype_name((cn_dtype)dt));
    return cn_set_error(CN_ERR_DTYPE, cn_op_name(op), "backend '%s' has no %s kernel for '%s' "
                        "(it takes %s); cast the inputs (cn_cast) or move them to a backend "
                        "that has one (cn_to_device, e.g. to cn_cpu())", b->name,
                        cn_dtype_name(dtype), cn_op_name(op), have);
}

/* Allocated outputs: views of them, the launch, and their versions bumped on success. */
static inline cn_status launch_into(const cn_backend *b, cn_device device, cn_op op, const cn_view *in,
                             int n_in, cn_tensor *const *out, int n_out, const int64_t *ints,
                             int n_ints, const double *reals, int n_reals,
                             const cn_conv_geometry *conv) {
    cn_view views[4]; /* kernels read dims below ndim only */
    for (int i = 0; i < n_out; i++) cn__tensor_as_view(out[i], &views[i]);
    cn_kernel_fn k = cn__kernel_for(b, op, in, n_in, views);
    if (!k) return cn_last_status();
    cn_status s = cn__launch_kernel(NULL, k, b, device, op, in, n_in, views, n_out, ints, n_ints,
                                    reals, n_reals, conv);
    if (s == CN_OK)
        for (int i = 0; i < n_out; i++) out[i]->storage->version++;
    return s;
}

cn_status cn__kernel_refused(const cn_backend *b, cn_op op, cn_dtype dt) {
    return b->kernels[op] ? cn__dtype_unsupported(b, op, dt) : cn__no_kernel(b, op);
}

cn_status cn__launch(const cn_backend *b, cn_device device, cn_op op, const cn_view *in, int n_in,
                     cn_tensor *const *out, int n_out, const int64_t *ints, int n_ints,
                     const double *reals, int n_reals) {
    return launch_into(b, device, op, in, n_in, out, n_out, ints, n_ints, reals, n_reals, NULL);
}

cn_status cn__launch_geom(const cn_backend *b, cn_device device, cn_op op, const cn_view *in,
                          int n_in, cn_tensor *const *out, int n_out, const int64_t *ints,
                          int n_ints, const cn_conv_geometry *conv) {
    return launch_into(b, device, op, in, n_in, out, n_out, ints, n_ints, NULL, 0, conv);
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

/* ---- in-place writes: overlap ------------------------------------------------------------- *
 * Strides are >= 0 (views never make negative ones; cn_from_memory refuses them), and the
 * elements of a non-empty tensor lie within its storage, so the sums below do not overflow. */

int cn__overlaps_itself(const cn_tensor *t) {
    if (t->numel <= 1) return 0;
    /* the usual case first: row-major dense (size-1 dims take any stride) cannot overlap */
    int64_t expect = 1;
    int dense = 1;
    for (int d = t->ndim - 1; d >= 0 && dense; d--) {
        if (t->shape[d] == 1) continue;
        dense = t->strides[d] == expect;
        expect *= t->shape[d];
    }
    if (dense) return 0;
    /* otherwise: taken by increasing stride, each dim must step past everything the smaller
     * ones reach. Sufficient, not necessary: an interleaving such as strides (3, 2) over
     * [2, 2] counts as overlapping, and only cn_from_memory can make one. */
    int64_t stride[CN_MAX_DIMS], size[CN_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 1) continue;
        if (t->strides[d] == 0) return 1;
        int k = n++;
        for (; k > 0 && stride[k - 1] > t->strides[d]; k--) {
            stride[k] = stride[k - 1];
            size[k] = size[k - 1];
        }
        stride[k] = t->strides[d];
        size[k] = t->shape[d];
    }
    int64_t reach = 0; /* the largest offset the smaller dims reach */
    for (int k = 0; k < n; k++) {
        if (stride[k] <= reach) return 1;
        reach += (size[k] - 1) * stride[k];
    }
    return 0;
}

/* The bytes [*lo, *hi) of its storage that view v of a tensor with storage base `base` reaches
 * (v non-empty). */
static void view_bytes(const cn_view *v, const char *base, int64_t *lo, int64_t *hi) {
    int64_t es = (int64_t)cn__dtype_size(v->dtype), last = 0;
    for (int d = 0; d < v->ndim; d++) last += (v->shape[d] - 1) * v->strides[d];
    *lo = (int64_t)((const char *)v->data - base);
    *hi = *lo + (last + 1) * es;
}

cn_status cn__copy_inplace(const char *op, cn_tensor *dst, cn_tensor *src) {
    char a[128];
    cn_view dv;
    cn__tensor_as_view(dst, &dv);
    if (dst->numel == 0) return cn__copy_into(dst, &dv, src); /* nothing to overlap */
    if (cn__overlaps_itself(dst))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'dst' %s has elements that share one memory "
                            "location (a stride 0, as cn_expand makes), so the write would land "
                            "on them more than once; write into a tensor with memory of its own "
                            "(cn_clone(dst)), or copy into the unexpanded tensor",
                            cn_tensor_str(dst, a, sizeof a));
    if (src->storage != dst->storage) return cn__copy_into(dst, &dv, src);
    /* one storage: direct only when src is disjoint from dst, or is dst element for element */
    cn_view sv;
    cn__broadcast_view(src, dv.shape, dv.ndim, &sv);
    const char *base = dst->storage->data;
    int64_t dlo, dhi, slo, shi;
    view_bytes(&dv, base, &dlo, &dhi);
    view_bytes(&sv, base, &slo, &shi);
    int same = sv.data == dv.data && sv.dtype == dv.dtype &&
               memcmp(sv.strides, dv.strides, sizeof(int64_t) * (size_t)dv.ndim) == 0;
    if (same || shi <= dlo || dhi <= slo) return cn__copy_into(dst, &dv, src);
    /* overlapping: read all of src first, into a temporary on its concrete device */
    cn_device concrete = src->device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    cn_tensor *tmp = cn__tensor_alloc(op, src->shape, src->ndim, src->dtype, concrete);
    if (!tmp) return cn_last_status();
    cn_view tv;
    cn__tensor_as_view(tmp, &tv);
    cn_status s = cn__copy_into(tmp, &tv, src);
    if (s == CN_OK) s = cn__copy_into(dst, &dv, tmp);
    cn_release(tmp);
    return s;
}

/* ---- scalars for integer tensors ---------------------------------------------------------- */

cn_status cn__check_int_scalar(const char *op, const char *arg, double v, cn_dtype dtype) {
    /* trunc(v) lies in [lo, hi] exactly when lo - 1 < v < hi + 1; both bounds are exact doubles
     * (2^63 for i64), and NaN fails every comparison */
    double below, above;
    const char *range;
    switch (dtype) {
    case CN_I32: below = -2147483649.0, above = 2147483648.0;
        range = "[-2147483648, 2147483647]";
        break;
    case CN_I64: below = -0x1p63, above = 0x1p63; /* -2^63 itself is in range: see below */
        range = "[-9223372036854775808, 9223372036854775807]";
        break;
    case CN_U8: below = -1.0, above = 256.0;
        range = "[0, 255]";
        break;
    default: return CN_OK; /* float dtypes take any double; bool takes v != 0 */
    }
    if (v > below && v < above) return CN_OK;
    if (dtype == CN_I64 && v == below) return CN_OK;
    return cn_set_error(CN_ERR_INVALID_ARG, op, "%s = %g does not convert to %s (%s); integers "
                        "hold values in %s after truncation toward zero: pass a value in that "
                        "range, or use a float dtype (cn_cast(x, CN_F64))",
                        arg, v, cn_dtype_name(dtype), v != v ? "NaN has no integer value"
                                                              : "out of range", range);
}

/* ---- the launch ---------------------------------------------------------------------------- */

cn_status cn__kernel_failed_silently(const char *name, const cn_backend *b, cn_op op,
                                     cn_status s) {
    if (cn_last_status() != CN_OK) return s;
    if (!name) name = cn_op_name(op);
    return cn_set_error(s, name, "the kernel of '%s' for backend '%s' failed without a message; "
                        "a kernel reports its failure with cn_set_error (or the error function "
                        "its module was handed)", name, b->name);
}

const cn_backend *cn__route_floats(const char *op, cn_tensor *const *in, const char *const *names,
                                   int n, int lead, cn_device *device) {
    const cn_backend *b = cn__route(op, in, names, n, device);
    if (!b) return NULL;
    for (int i = 0; i < n; i++)
        if (cn__check_kind(op, names[i], in[i], CN_KINDS_FLOAT) != CN_OK ||
            cn__check_same_dtype(op, names[lead], in[lead], names[i], in[i]) != CN_OK)
            return NULL;
    return b;
}
