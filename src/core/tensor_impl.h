/* The tensor and storage layouts, shared by core, dispatch and (later) autodiff. Backends never
 * see these: they get cn_view. */
#ifndef CINDER_CORE_TENSOR_IMPL_H
#define CINDER_CORE_TENSOR_IMPL_H

#include <stdint.h>

#include "cinder/backend.h"
#include "cinder/tensor.h"
#include "core/dtype.h"

/* Device memory with its owner backend. Shared by all views of it. */
typedef struct cn_storage {
    int64_t refcount;
    cn_device device;       /* concrete device (autodiff flag clear) */
    void *data;
    size_t nbytes;
    uint64_t version;       /* bumped by in-place writes (autodiff checks saved tensors with it) */
} cn_storage;

struct cn_tensor {
    int64_t refcount;
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CN_MAX_DIMS]; /* in elements */
    int64_t offset;               /* in elements, into storage */
    int64_t numel;
    cn_device device;             /* as the user sees it (may carry the autodiff flag) */
    cn_storage *storage;          /* NULL for autodiff primitives that wrap an inner tensor */
    void *autograd;               /* the autodiff layer's node data; NULL for concrete tensors */
    int64_t scope_slot;           /* index in this thread's scope list, -1 when not scoped */
    int scope_kept;               /* cn_keep was called: survives the innermost scope's end */
};

/* Allocates an uninitialised contiguous tensor on a concrete device. Checks that the backend and
 * device exist and that the byte size does not overflow. `op` names the caller for errors. */
cn_tensor *cn__tensor_alloc(const char *op, const int64_t *shape, int ndim, cn_dtype dtype,
                            cn_device device);

/* cn__tensor_alloc after its checks: shape (ndim in range, sizes >= 0) and dtype known valid,
 * b the backend of device's concrete device, already looked up (cn__route). Still checks that
 * the byte size does not overflow. */
cn_tensor *cn__tensor_alloc_routed(const char *op, const cn_backend *b, const int64_t *shape,
                                   int ndim, cn_dtype dtype, cn_device device);

/* A new tensor header sharing src's storage, with the given geometry (a view). */
cn_tensor *cn__tensor_view(cn_tensor *src, const int64_t *shape, const int64_t *strides, int ndim,
                           int64_t offset);

/* Fills a kernel view from a tensor. */
static inline void cn__tensor_as_view(const cn_tensor *t, cn_view *v) {
    v->data = (char *)t->storage->data + t->offset * (int64_t)cn__dtype_size(t->dtype);
    v->dtype = t->dtype;
    v->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        v->shape[d] = t->shape[d];
        v->strides[d] = t->strides[d];
    }
}

/* Row-major contiguous strides for shape; returns 0 or CN_ERR_OVERFLOW if numel overflows, and
 * writes numel. */
cn_status cn__contiguous_strides(const int64_t *shape, int ndim, int64_t *strides,
                                 int64_t *numel);

/* Normalises a possibly-negative dim for a tensor of ndim dims (ndim + 1 when inserting).
 * Returns -1 with the error set when out of range. */
int cn__norm_dim(const char *op, const char *arg, int dim, int ndim);

/* Formats "[2, 3]" into buf. */
const char *cn__shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* Scope bookkeeping (scope.c). Every tensor header is registered in the innermost open scope when
 * it is made; a tensor freed before its scope ends is forgotten by the scope. */
extern _Thread_local int cn__scope_depth_now; /* open scopes on this thread (scope.c) */
cn_status cn__scope_add(cn_tensor *t);
void cn__scope_remove(cn_tensor *t);
static inline cn_status cn__scope_register(cn_tensor *t) {
    return cn__scope_depth_now > 0 ? cn__scope_add(t) : CN_OK;
}
static inline void cn__scope_forget(cn_tensor *t) {
    if (t->scope_slot >= 0) cn__scope_remove(t);
}

/* Hook for the autodiff layer: frees t->autograd when a tracked tensor dies. */
extern void (*cn__autograd_free)(cn_tensor *t);

#endif
