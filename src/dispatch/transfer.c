/* Moving data: to host memory, and between devices (through the host where no direct path). */
#include <string.h>

#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "dispatch/registry.h"
#include "dispatch/router.h"

cn_status cn_read(const cn_tensor *t, void *dst, size_t nbytes) {
    const char *op = "read";
    CN__CHECK_LIVE(op, t);
    if (!t || !dst) {
        cn__null_arg(op, !t ? "t" : "dst");
        return cn_last_status();
    }
    if (cn__is_quant(t->dtype)) return cn__kind_error(op, "t", t, CN_KINDS_ALL);
    size_t want = (size_t)t->numel * cn_dtype_size(t->dtype);
    if (nbytes != want) {
        char buf[128];
        return cn_set_error(CN_ERR_BUFFER, op, "the buffer has %zu bytes but %s needs exactly %zu "
                            "(numel * dtype size); size the buffer with cn_numel and "
                            "cn_dtype_size", nbytes, cn_tensor_str(t, buf, sizeof buf), want);
    }
    cn_tensor *dense = cn_contiguous((cn_tensor *)t);
    if (!dense) return cn_last_status();
    const cn_backend *b = cn__backend(dense->storage->device.backend);
    cn_status s = CN_OK;
    if (b->synchronize) s = b->synchronize(b->ctx, dense->storage->device.index);
    if (s == CN_OK && want)
        s = b->copy_to_host(b->ctx, dense->storage->device.index, dst,
                            (char *)dense->storage->data +
                                dense->offset * (int64_t)cn_dtype_size(dense->dtype),
                            want);
    cn_release(dense);
    return s;
}

cn_tensor *cn_to_device(cn_tensor *t, cn_device device) {
    const char *op = "to_device";
    CN__CHECK_LIVE(op, t);
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    cn_tensor *same = NULL;
    if (cn_device_eq(t->device, device)) /* a new header: the result is a reference of its own */
        return cn__record(CN__OP_VIEW, cn__tensor_view(t, t->shape, t->strides, t->ndim, t->offset),
                          &t, 1, NULL, 0, NULL, 0);
    if (t->device.backend == device.backend && t->device.index == device.index) {
        /* the same memory seen through (or without) the autodiff layer: share it, untracked */
        same = cn__tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
        if (same) same->device = device;
        return same;
    }
    if (cn__is_quant(t->dtype)) return cn__quant_to_device(op, t, device);
    cn_tensor *dense = cn_contiguous(t);
    if (!dense) return NULL;
    size_t nbytes = (size_t)dense->numel * cn_dtype_size(dense->dtype);
    void *host = cn__malloc(op, nbytes);
    cn_tensor *out = NULL;
    if (host && cn_read(dense, host, nbytes) == CN_OK)
        out = cn_from_data(host, dense->shape, dense->ndim, dense->dtype, device);
    cn__free(host);
    cn_release(dense);
    return out;
}
