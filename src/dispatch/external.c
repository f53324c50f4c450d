/* Tensors over memory the caller owns (cn_from_memory), and the address of a tensor's data
 * (cn_data_ptr). Every size comes from the caller, so every product and sum is checked. */
#include <stdint.h>

#include "core/error_internal.h"
#include "core/quant.h"
#include "core/tensor_impl.h"
#include "dispatch/external.h"
#include "dispatch/registry.h"

/* Checks the geometry and writes the element count and the bytes the strides reach (0 without
 * elements): the last element is at sum((shape[d] - 1) * strides[d]). */
static cn_status check_geometry(const char *op, const cn__memory_names *names,
                                const int64_t *shape, int ndim, const int64_t *strides,
                                cn_dtype dtype, int64_t *numel, size_t *nbytes) {
    char buf[160];
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return cn_set_error(CN_ERR_INVALID_ARG, op, "%s %s has a negative size at dim %d; "
                                "sizes must be >= 0", names->shape,
                                cn__shape_str(shape, ndim, buf, sizeof buf), d);
    for (int d = 0; strides && d < ndim; d++)
        if (strides[d] < 0)
            return cn_set_error(CN_ERR_INVALID_ARG, op, "%s %s has a negative stride at dim %d; "
                                "cinder has no negative strides, so pass a copy laid out with "
                                "strides >= 0 (or copy the data in with cn_from_data)",
                                names->strides,
                                cn__shape_str(strides, ndim, buf, sizeof buf), d);
    int64_t dense[CN_MAX_DIMS];
    int64_t esize = (int64_t)cn__dtype_size(dtype), n;
    if (cn__contiguous_strides(shape, ndim, dense, &n) != CN_OK || n > INT64_MAX / esize)
        return cn_set_error(CN_ERR_OVERFLOW, op, "%s %s of %s has too many elements (the byte "
                            "size overflows); check the shape for a mistake", names->shape,
                            cn__shape_str(shape, ndim, buf, sizeof buf), cn_dtype_name(dtype));
    *numel = n;
    *nbytes = 0;
    if (n == 0) return CN_OK;
    const int64_t *st = strides ? strides : dense;
    int64_t last = 0, step; /* index of the last element, in elements */
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(shape[d] - 1, st[d], &step) ||
            __builtin_add_overflow(last, step, &last))
            goto overflow;
    int64_t bytes;
    if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, esize, &bytes) ||
        (uint64_t)bytes > SIZE_MAX / 2)
        goto overflow;
    *nbytes = (size_t)bytes;
    return CN_OK;
overflow:;
    char sbuf[160];
    return cn_set_error(CN_ERR_OVERFLOW, op, "%s %s with shape %s reaches past 2^63 bytes of %s; "
                        "check the strides (in elements, not bytes) for a mistake", names->strides,
                        cn__shape_str(st, ndim, buf, sizeof buf),
                        cn__shape_str(shape, ndim, sbuf, sizeof sbuf), cn_dtype_name(dtype));
}

cn_tensor *cn__from_memory(const char *op, const cn__memory_names *names, void *data,
                           const int64_t *shape, int ndim, const int64_t *strides, cn_dtype dtype,
                           cn_device device, cn_deleter deleter, void *ctx) {
    if (ndim < 0 || ndim > CN_MAX_DIMS) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "%s = %d; tensors have 0 to %d dims", names->ndim,
                     ndim, CN_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !shape) {
        cn__null_arg(op, names->shape);
        return NULL;
    }
    if ((unsigned)dtype >= CN_DTYPE_COUNT) {
        cn_set_error(CN_ERR_DTYPE, op, "dtype value %d is not a cn_dtype; use CN_F32, CN_I64, ...",
                     (int)dtype);
        return NULL;
    }
    if (cn__is_quant(dtype)) {
        cn_set_error(CN_ERR_DTYPE, op, "dtype %s is quantized: its tensors hold packed values "
                     "and scales; make one with cn_quantize(x, %s) from a float tensor",
                     cn_dtype_name(dtype), cn_dtype_name(dtype));
        return NULL;
    }
    int64_t numel = 0;
    size_t nbytes = 0;
    if (check_geometry(op, names, shape, ndim, strides, dtype, &numel, &nbytes) != CN_OK)
        return NULL;
    if (!data && numel > 0) {
        cn__null_arg(op, names->data);
        return NULL;
    }
    size_t esize = cn__dtype_size(dtype);
    if ((uintptr_t)data % esize != 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "%s = %p is not aligned to %zu bytes, the size of "
                     "%s; pass an aligned address (or copy the data with cn_from_data)",
                     names->data, data, esize, cn_dtype_name(dtype));
        return NULL;
    }
    cn_device concrete = device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    if (!cn__backend(concrete.backend)) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "device has backend id %d, which is not "
                     "registered (an invalid device, e.g. from a bad CINDER_DEVICE); use cn_cpu() "
                     "or cn_device_parse", concrete.backend);
        return NULL;
    }
    if (!cn__backend_for_device(op, concrete)) return NULL;
    int64_t dense[CN_MAX_DIMS], unused;
    if (!strides) {
        cn__contiguous_strides(shape, ndim, dense, &unused); /* checked above */
        strides = dense;
    }
    return cn__tensor_external(op, data, nbytes, shape, strides, ndim, numel, dtype, device,
                               deleter, ctx);
}

cn_tensor *cn_from_memory(void *data, const int64_t *shape, int ndim, const int64_t *strides,
                          cn_dtype dtype, cn_device device, cn_deleter deleter, void *ctx) {
    static const cn__memory_names names = {"data", "shape", "ndim", "strides"};
    return cn__from_memory("from_memory", &names, data, shape, ndim, strides, dtype, device,
                           deleter, ctx);
}

void *cn_data_ptr(const cn_tensor *t) {
    if (!t) {
        cn__null_arg("data_ptr", "t");
        return NULL;
    }
    char *base = t->storage->data;
    if (cn__is_quant(t->dtype)) return base; /* packed: the storage (cinder/quant.h) */
    return base ? base + t->offset * (int64_t)cn__dtype_size(t->dtype) : NULL;
}
