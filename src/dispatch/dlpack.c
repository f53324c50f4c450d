/* DLPack 0.6 export and import: a DLManagedTensor shares a tensor's memory with another
 * framework, in either direction, without a copy. Export hands out a header over the tensor's
 * storage (the managed tensor's reference); import makes external storage whose deleter calls
 * the managed tensor's (dispatch/external.c). */
#include <dlpack/dlpack.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "dispatch/external.h"
#include "dispatch/registry.h"
#include "dispatch/router.h"

/* kDLBool of DLPack 0.8 and later; 0.6, which this builds against, has no bool code (export
 * writes bool as kDLUInt 8). */
#define DL_BOOL_CODE 6U

/* ---- dtypes --------------------------------------------------------------------------------- */

static DLDataType dtype_to_dl(cn_dtype dt) {
    DLDataType t = {kDLFloat, 32, 1};
    switch (dt) {
    case CN_F32: t.code = kDLFloat, t.bits = 32; break;
    case CN_F64: t.code = kDLFloat, t.bits = 64; break;
    case CN_F16: t.code = kDLFloat, t.bits = 16; break;
    case CN_BF16: t.code = kDLBfloat, t.bits = 16; break;
    case CN_I32: t.code = kDLInt, t.bits = 32; break;
    case CN_I64: t.code = kDLInt, t.bits = 64; break;
    case CN_U8: t.code = kDLUInt, t.bits = 8; break;
    case CN_BOOL: t.code = kDLUInt, t.bits = 8; break; /* bytes of 0 and 1 */
    case CN_Q8_TENSOR: case CN_Q8_CHANNEL: case CN_Q8_BLOCK: case CN_Q4_BLOCK:
    case CN_DTYPE_COUNT: break; /* quantized (refused by cn_to_dlpack) or not a dtype */
    }
    return t;
}

/* The cinder dtype of a DLPack one, or CN_DTYPE_COUNT. */
static cn_dtype dtype_from_dl(DLDataType t) {
    switch (t.code) {
    case kDLFloat:
        return t.bits == 32   ? CN_F32
               : t.bits == 64 ? CN_F64
               : t.bits == 16 ? CN_F16
                              : CN_DTYPE_COUNT;
    case kDLBfloat: return t.bits == 16 ? CN_BF16 : CN_DTYPE_COUNT;
    case kDLInt: return t.bits == 32 ? CN_I32 : t.bits == 64 ? CN_I64 : CN_DTYPE_COUNT;
    case kDLUInt: return t.bits == 8 ? CN_U8 : CN_DTYPE_COUNT;
    case DL_BOOL_CODE: return t.bits == 8 ? CN_BOOL : CN_DTYPE_COUNT;
    default: return CN_DTYPE_COUNT;
    }
}

/* ---- export --------------------------------------------------------------------------------- */

/* One allocation: the managed tensor first (its deleter gets that address), then its arrays. */
typedef struct exported {
    DLManagedTensor managed;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CN_MAX_DIMS];
} exported;

/* The managed tensor's deleter: drops its header over the storage (manager_ctx), then itself. */
static void exported_delete(DLManagedTensor *self) {
    cn_release(self->manager_ctx);
    cn__free(self);
}

struct DLManagedTensor *cn_to_dlpack(cn_tensor *t) {
    const char *op = "to_dlpack";
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    if (cn__is_quant(t->dtype)) {
        cn__kind_error(op, "t", t, CN_KINDS_ALL); /* DLPack has no packed dtypes */
        return NULL;
    }
    cn_device concrete = t->storage->device; /* a tracked tensor exports its concrete data */
    const cn_backend *b = cn__backend(concrete.backend);
    DLDevice dev;
    if (concrete.backend == CN_BACKEND_CPU) {
        dev.device_type = kDLCPU;
        dev.device_id = 0;
    } else if (b && strcmp(b->name, "cuda") == 0) {
        dev.device_type = kDLCUDA;
        dev.device_id = concrete.index;
    } else {
        char buf[128];
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "'t' is %s, on backend '%s', which has no DLPack "
                     "device type (cinder exports cpu and cuda tensors); copy it first with "
                     "cn_to_device(t, cn_cpu())", cn_tensor_str(t, buf, sizeof buf),
                     b ? b->name : "?");
        return NULL;
    }
    /* the consumer reads the memory as soon as it has it: no work of ours may still be queued */
    if (b && b->synchronize && b->synchronize(b->ctx, concrete.index) != CN_OK) return NULL;
    exported *e = cn__malloc(op, sizeof *e);
    if (!e) return NULL;
    cn_tensor *ref = cn__tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
    if (!ref) {
        cn__free(e);
        cn_set_error(cn_last_status(), op, "could not make the header that holds t's storage for "
                     "the managed tensor; free tensors you no longer need (cn_release, scopes)");
        return NULL;
    }
    cn__scope_forget(ref); /* owned by the managed tensor, whatever scope is open */
    ref->device = concrete;
    memset(e, 0, sizeof *e);
    size_t esize = cn__dtype_size(t->dtype);
    DLTensor *dl = &e->managed.dl_tensor;
    dl->data = t->storage->data;
    dl->byte_offset = (uint64_t)t->offset * esize;
    dl->device = dev;
    dl->ndim = t->ndim;
    dl->dtype = dtype_to_dl(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        e->shape[d] = t->shape[d];
        e->strides[d] = t->strides[d];
    }
    dl->shape = e->shape;
    dl->strides = e->strides;
    e->managed.manager_ctx = ref;
    e->managed.deleter = exported_delete;
    return &e->managed;
}

/* ---- import --------------------------------------------------------------------------------- */

/* The imported storage's deleter: gives the managed tensor back to its producer. */
static void imported_delete(void *data, void *ctx) {
    (void)data;
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

static const char *device_type_name(int type) {
    switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    default: return "not a DLPack 0.6 device type";
    }
}

/* The cinder device of a DLPack one; CN_ERR_* with the error set when there is none. */
static cn_status device_from_dl(const char *op, DLDevice dev, cn_device *out) {
    const char *arg = "m->dl_tensor.device";
    if (dev.device_type == kDLCPU) {
        if (dev.device_id != 0)
            return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "%s is kDLCPU with device_id %d; "
                                "the CPU is device 0, so set device_id = 0", arg, dev.device_id);
        *out = cn_cpu();
        return CN_OK;
    }
    if (dev.device_type == kDLCUDA) {
        int id = cn_backend_find("cuda");
        if (id < 0)
            return cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "%s is kDLCUDA %d but this build has no "
                                "cuda backend (`cinder info` lists the backends); build with CUDA, "
                                "or copy the tensor to the CPU before exporting it", arg,
                                dev.device_id);
        if (dev.device_id < 0 || dev.device_id > INT16_MAX)
            return cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "%s is kDLCUDA with device_id %d, "
                                "which is not a device index; check the producer's device",
                                arg, dev.device_id);
        cn_device d = {(int16_t)id, (int16_t)dev.device_id, 0, 0};
        *out = d;
        return CN_OK;
    }
    return cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "%s.device_type = %d (%s) has no cinder "
                        "backend; cinder imports kDLCPU and kDLCUDA memory: copy the tensor to the "
                        "CPU in the producing framework first", arg, (int)dev.device_type,
                        device_type_name((int)dev.device_type));
}

cn_tensor *cn_from_dlpack(struct DLManagedTensor *m) {
    const char *op = "from_dlpack";
    static const cn__memory_names names = {"m->dl_tensor.data + byte_offset",
                                           "m->dl_tensor.shape", "m->dl_tensor.ndim",
                                           "m->dl_tensor.strides"};
    if (!m) {
        cn__null_arg(op, "m");
        return NULL;
    }
    const DLTensor *dl = &m->dl_tensor;
    DLDataType t = dl->dtype;
    if (t.lanes != 1) {
        cn_set_error(CN_ERR_DTYPE, op, "m->dl_tensor.dtype has %u lanes (code %u, bits %u); "
                     "cinder tensors hold one value per element, so export a tensor of scalars "
                     "(lanes = 1)", (unsigned)t.lanes, (unsigned)t.code, (unsigned)t.bits);
        return NULL;
    }
    cn_dtype dtype = dtype_from_dl(t);
    if (dtype == CN_DTYPE_COUNT) {
        cn_set_error(CN_ERR_DTYPE, op, "m->dl_tensor.dtype (code %u, bits %u) has no cinder "
                     "dtype; cinder imports kDLFloat 16/32/64, kDLBfloat 16, kDLInt 32/64, "
                     "kDLUInt 8 and bool (code 6, bits 8): convert the tensor in the producing "
                     "framework first", (unsigned)t.code, (unsigned)t.bits);
        return NULL;
    }
    cn_device device;
    if (device_from_dl(op, dl->device, &device) != CN_OK) return NULL;
    uintptr_t addr;
    if (dl->byte_offset > UINTPTR_MAX ||
        __builtin_add_overflow((uintptr_t)dl->data, (uintptr_t)dl->byte_offset, &addr)) {
        cn_set_error(CN_ERR_OVERFLOW, op, "m->dl_tensor.data %p + byte_offset %llu passes the end "
                     "of the address space; check byte_offset (in bytes)", dl->data,
                     (unsigned long long)dl->byte_offset);
        return NULL;
    }
    if (!dl->data && dl->byte_offset) addr = 0; /* no memory to offset into: the null check says */
    return cn__from_memory(op, &names, (void *)addr, dl->shape, dl->ndim, dl->strides, dtype,
                           device, imported_delete, m);
}
