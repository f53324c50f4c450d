/* The tensor and storage layouts, shared by core, dispatch and (later) autodiff. Backends never
 * see these: they get cn_view. */
#ifndef CINDER_CORE_TENSOR_IMPL_H
#define CINDER_CORE_TENSOR_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "cinder/backend.h"
#include "cinder/tensor.h"
#include "core/dtype.h"

/* Device memory with its owner backend. Shared by all views of it. */
typedef struct cn_storage {
    _Atomic int64_t refcount; /* shared across threads: see cn__ref_drop */
    cn_device device;       /* concrete device (autodiff flag clear) */
    /* The table of the backend that allocated data, which frees it (backend->free): core frees
     * storage through it without asking the registry. Registered tables never move. NULL for
     * external storage. */
    const cn_backend *backend;
    void *data;
    size_t nbytes;
    uint64_t version;       /* bumped by in-place writes (autodiff checks saved tensors with it) */
    /* Memory the caller owns (cn_from_memory, cn_from_dlpack) when `external` is set: never
     * recycled and never given to the backend's free; deleter(data, deleter_ctx), when not NULL,
     * runs once when the storage dies. */
    int external;
    void (*deleter)(void *data, void *ctx);
    void *deleter_ctx;
    /* Quantized tensors only (read only when a tensor's dtype is quantized, set by cn_quantize):
     * the byte offset of the scales in data, and the storage elements per scale (core/quant.h). */
    int64_t q_scales_at;
    int64_t q_group;
    int64_t q_nbytes; /* bytes of values and scales together */
} cn_storage;

struct cn_tensor {
    _Atomic int64_t refcount;     /* shared across threads: see cn__ref_drop */
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
#ifdef CINDER_CHECK_MISUSE
    uint32_t live;                /* CN__LIVE while a tensor, CN__DEAD once released */
    uint64_t serial;              /* "tensor #n" in misuse messages */
    const void *scope_owner;      /* the scope list (one per thread) that holds it, when scoped */
#endif
};

/* ---- reference counts ----------------------------------------------------------------------- *
 * Any thread may retain and release a tensor, so counts are atomic. Taking a reference needs one
 * already held: a relaxed increment. Dropping one is an acq_rel decrement, so that the thread that
 * frees sees every write of the threads that dropped theirs before. When the count reads 1
 * (acquire), the caller holds the only reference and no other thread can take one: the count is
 * cleared with a plain store, and a tensor that lives on one thread (nearly all) is released
 * without a locked instruction. */
static inline void cn__ref_take(_Atomic int64_t *count) {
    atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
}

/* Drops one reference; non-zero when it was the last (the caller frees). */
static inline int cn__ref_drop(_Atomic int64_t *count) {
    if (atomic_load_explicit(count, memory_order_acquire) == 1) {
        atomic_store_explicit(count, 0, memory_order_relaxed);
        return 1;
    }
    return atomic_fetch_sub_explicit(count, 1, memory_order_acq_rel) == 1;
}

static inline int64_t cn__ref_count(_Atomic int64_t *count) {
    return atomic_load_explicit(count, memory_order_acquire);
}

/* ---- misuse checks (debug and sanitizer builds) ----------------------------------------------- *
 * With CINDER_CHECK_MISUSE defined (CMake defines it in Debug and sanitizer builds), a released
 * header is marked dead and quarantined instead of being recycled, and the public entry points
 * (the router, cn_retain/cn_release, the accessors, scopes) check the tensors they are given: a
 * dead or foreign one stops the program with a message naming the tensor and the call. Without
 * it the checks compile to nothing. */
#define CN__LIVE 0x4C495645u /* "LIVE" */
#define CN__DEAD 0xDEADDEADu
#ifdef CINDER_CHECK_MISUSE
/* Prints "cinder: misuse in <op>: tensor #n <shape> <dtype> <device> (<address>) <what>" to
 * stderr and aborts. */
_Noreturn void cn__misuse(const char *op, const cn_tensor *t, const char *what);
void cn__misuse_dead(const char *op, const cn_tensor *t); /* t is not live: says how, aborts */
static inline void cn__check_live(const char *op, const cn_tensor *t) {
    if (t && t->live != CN__LIVE) cn__misuse_dead(op, t);
}
#define CN__CHECK_LIVE(op, t) cn__check_live((op), (t))
#else
#define CN__CHECK_LIVE(op, t) ((void)0)
#endif

/* Allocates an uninitialised contiguous tensor on a concrete device. Checks the shape, the dtype,
 * that the backend and device exist and that the byte size does not overflow. `op` names the
 * caller for errors. Defined by dispatch (dispatch/registry.c), which owns the device lookup; it
 * is declared here beside cn__tensor_alloc_routed for the router's callers. Core never calls
 * it. */
cn_tensor *cn__tensor_alloc(const char *op, const int64_t *shape, int ndim, cn_dtype dtype,
                            cn_device device);

/* cn__tensor_alloc after its checks: shape (ndim in range, sizes >= 0) and dtype known valid,
 * b the backend of device's concrete device, already looked up (cn__route). Still checks that
 * the byte size does not overflow. The storage keeps b, which frees its memory. */
cn_tensor *cn__tensor_alloc_routed(const char *op, const cn_backend *b, const int64_t *shape,
                                   int ndim, cn_dtype dtype, cn_device device);

/* A tensor over caller-owned memory `data` of nbytes (the bytes its geometry reaches), with the
 * given (already checked) shape, strides, numel and dtype, on `device` (the storage on its
 * concrete device, whose backend exists). The storage is external: deleter(data, ctx) runs when
 * it dies (NULL: nothing does). On failure (out of memory, scope) the error is set, the deleter
 * is not called and nothing is kept. */
cn_tensor *cn__tensor_external(const char *op, void *data, size_t nbytes, const int64_t *shape,
                               const int64_t *strides, int ndim, int64_t numel, cn_dtype dtype,
                               cn_device device, void (*deleter)(void *data, void *ctx),
                               void *ctx);

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

/* Hook for the autodiff layer: frees t->autograd when a tracked tensor dies. Set (always to the
 * same function) by the first node any thread records, so it is atomic: relaxed suffices, as a
 * tensor with a node is only released after the store that preceded its node's creation. */
typedef void (*cn__autograd_free_fn)(cn_tensor *t);
extern _Atomic(cn__autograd_free_fn) cn__autograd_free;

#endif
