/* Tensor headers and storage: allocation, views, reference counting, metadata. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/memory.h"
#include "cinder/ops.h" /* cn_shares_memory */
#include "core/alloc.h"
#include "core/counters.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "core/thread_exit.h"

_Atomic(cn__autograd_free_fn) cn__autograd_free;

int64_t cn_live_tensors(void) { return cn__counter_total(CN__TENSORS); }
int64_t cn_live_bytes(void) { return cn__counter_total(CN__BYTES); }

/* ---- geometry helpers --------------------------------------------------------------------- */

cn_status cn__contiguous_strides(const int64_t *shape, int ndim, int64_t *strides,
                                 int64_t *numel) {
    /* strides as PyTorch's: sizes of 0 count as 1. An empty tensor has no elements whatever its
     * other sizes, so its strides saturate instead of reporting an overflow. */
    int64_t n = 1;
    int empty = 0, overflow = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = n;
        int64_t s = shape[d] ? shape[d] : 1;
        empty |= shape[d] == 0;
        if (__builtin_mul_overflow(n, s, &n)) {
            overflow = 1;
            n = INT64_MAX;
        }
    }
    if (overflow && !empty) return CN_ERR_OVERFLOW;
    *numel = empty ? 0 : n;
    return CN_OK;
}

const char *cn__shape_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld",
                                 (long long)shape[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

int cn__norm_dim(const char *op, const char *arg, int dim, int ndim) {
    int n = ndim == 0 ? 1 : ndim; /* a scalar accepts dim 0 and -1, like PyTorch */
    int d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "%s = %d is out of range for a tensor with %d "
                     "dim%s; use a dim in [%d, %d]", arg, dim, ndim, ndim == 1 ? "" : "s", -n,
                     n - 1);
        return -1;
    }
    return d;
}

/* ---- small-object caches ------------------------------------------------------------------- *
 * Every op makes a tensor header and a storage record and frees them soon after; recycling them
 * per thread saves two malloc/free pairs on the hot path. A recycled object still counts as an
 * allocation for the failure-injection mode. */

#define CACHE_SLOTS 64

typedef struct object_cache {
    void *items[CACHE_SLOTS];
    int count;
} object_cache;

static _Thread_local object_cache header_cache, storage_cache;
static _Thread_local int caches_armed; /* this thread's exit hook is set (thread_exit.h) */

static void free_caches(void);
static cn__thread_exit caches_exit = CN__THREAD_EXIT_INIT(free_caches);

/* Called before a thread first keeps something: its caches are freed when it exits. */
static void arm_caches(void) {
    if (caches_armed) return;
    caches_armed = 1;
    cn__thread_exit_arm(&caches_exit);
}

static void *cache_take(object_cache *c, const char *op, size_t size) {
    if (c->count == 0) return cn__malloc(op, size);
    if (cn__alloc_should_fail()) {
        cn_set_error(CN_ERR_OUT_OF_MEMORY, op, "could not allocate %zu bytes of host memory; "
                     "free tensors you no longer need (cn_release, scopes)", size);
        return NULL;
    }
    return c->items[--c->count];
}

static void cache_put(object_cache *c, void *p) {
    arm_caches();
    if (c->count < CACHE_SLOTS)
        c->items[c->count++] = p;
    else
        cn__free(p);
}

/* ---- headers ------------------------------------------------------------------------------ */

#ifdef CINDER_CHECK_MISUSE
/* Misuse builds: a released header is marked dead and kept here (per thread, the newest
 * QUARANTINE_SLOTS) instead of being recycled, so a later use of it meets the mark and not a new
 * tensor; the oldest goes back to the C library, where ASan sees any use of it. */
#define QUARANTINE_SLOTS 4096
static _Thread_local struct {
    cn_tensor *items[QUARANTINE_SLOTS];
    int next, count;
} quarantine;
static _Atomic uint64_t next_serial;

static void header_free(cn_tensor *t) {
    t->live = CN__DEAD;
    t->storage = NULL;
    t->autograd = NULL;
    arm_caches();
    if (quarantine.count == QUARANTINE_SLOTS) cn__free(quarantine.items[quarantine.next]);
    else quarantine.count++;
    quarantine.items[quarantine.next] = t;
    quarantine.next = (quarantine.next + 1) % QUARANTINE_SLOTS;
}

static void free_quarantine(void) {
    for (int i = 0; i < quarantine.count; i++) cn__free(quarantine.items[i]);
    quarantine.count = quarantine.next = 0;
}
#else
static void header_free(cn_tensor *t) { cache_put(&header_cache, t); }
static void free_quarantine(void) {}
#endif

static cn_tensor *header_new(const char *op) {
    cn_tensor *t = cache_take(&header_cache, op, sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    atomic_store_explicit(&t->refcount, 1, memory_order_relaxed);
    t->scope_slot = -1;
#ifdef CINDER_CHECK_MISUSE
    t->live = CN__LIVE;
    t->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed) + 1;
#endif
    if (cn__scope_register(t) != CN_OK) {
        cache_put(&header_cache, t);
        return NULL;
    }
    cn__count(CN__TENSORS, 1);
    return t;
}

/* ---- spare tensors -------------------------------------------------------------------------- *
 * A small tensor that dies owning its storage alone is kept whole (header, storage record and
 * data) and handed out again as the next tensor of the same byte size on the same device: in a
 * loop of tiny ops, making and freeing those three costs as much as the rest of the op. At most
 * SPARE_SLOTS tensors of at most SPARE_BYTES of data are kept per thread. */

#define SPARE_BYTES 256
#define SPARE_SLOTS 16
#define SPARE_SCAN 4 /* entries looked at from the top: a loop frees what it allocates next */

static _Thread_local struct {
    cn_tensor *items[SPARE_SLOTS];
    int count;
} spare;

/* A spare tensor with nbytes of data on the concrete device, taken off the list, or NULL. */
static cn_tensor *spare_take(cn_device device, size_t nbytes) {
    for (int i = spare.count - 1; i >= 0 && i >= spare.count - SPARE_SCAN; i--) {
        cn_tensor *t = spare.items[i];
        const cn_storage *s = t->storage;
        if (s->nbytes != nbytes || s->device.backend != device.backend ||
            s->device.index != device.index)
            continue;
        spare.items[i] = spare.items[--spare.count];
        return t;
    }
    return NULL;
}

/* Keeps a dead tensor whole when it is small and alone on its storage; 0 when it is not kept.
 * Not empty ones: their data may point just past a block, which leak checkers miss. Not
 * caller-owned memory (external): it goes back through its deleter. */
static int spare_keep(cn_tensor *t) {
#ifdef CINDER_CHECK_MISUSE
    (void)t; /* a released header is quarantined, never handed out again */
    return 0;
#endif
    cn_storage *s = t->storage;
    if (!s || s->external || s->refcount != 1 || !s->data || s->nbytes == 0 ||
        s->nbytes > SPARE_BYTES || spare.count == SPARE_SLOTS)
        return 0;
    arm_caches();
    spare.items[spare.count++] = t;
    return 1;
}

/* ---- storage ------------------------------------------------------------------------------ */

static void storage_free_data(cn_storage *s) {
    if (s->external) { /* caller-owned: back through its deleter, never the backend's free */
        if (s->deleter) s->deleter(s->data, s->deleter_ctx);
        s->external = 0;
        s->data = NULL;
        return;
    }
    const cn_backend *b = s->backend; /* the allocator's table, kept by storage_new */
    if (b && s->data) b->free(b->ctx, s->device.index, s->data);
    s->data = NULL;
}

static void storage_release(cn_storage *s) {
    if (!s || !cn__ref_drop(&s->refcount)) return;
    cn__count(CN__BYTES, -(int64_t)s->nbytes);
    storage_free_data(s);
    cache_put(&storage_cache, s);
}

/* At a thread's exit: everything its caches hold goes back to the backends and the C library.
 * Freeing may refill a cache (a backend's free), so the hook is re-armed by the next put. */
static void free_caches(void) {
    caches_armed = 0;
    while (spare.count > 0) {
        cn_tensor *t = spare.items[--spare.count];
        storage_free_data(t->storage);
        cn__free(t->storage);
        cn__free(t);
    }
    while (storage_cache.count > 0) cn__free(storage_cache.items[--storage_cache.count]);
    while (header_cache.count > 0) cn__free(header_cache.items[--header_cache.count]);
    free_quarantine();
}

/* A storage record with nbytes of data on the concrete device of backend b. */
static cn_storage *storage_new(const char *op, const cn_backend *b, cn_device concrete,
                               size_t nbytes) {
    cn_storage *s = cache_take(&storage_cache, op, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    atomic_store_explicit(&s->refcount, 1, memory_order_relaxed);
    s->device = concrete;
    s->backend = b;
    s->nbytes = nbytes;
    if (b->alloc(b->ctx, concrete.index, nbytes, &s->data) != CN_OK) {
        cache_put(&storage_cache, s);
        return NULL;
    }
    return s;
}

/* A spare tensor made ready for the given geometry, or NULL (none fits, or the failure mode
 * failed it: then the error is set and the spare stays). */
static cn_tensor *spare_reuse(const char *op, cn_device concrete, size_t nbytes, int *failed) {
    cn_tensor *t = spare_take(concrete, nbytes);
    if (!t) return NULL;
    /* still the three allocations it replaces (header, storage record, data) for the
     * failure-injection mode, so that a computation's count does not depend on the spares */
    int fail = cn__allocs_should_fail(3);
    if (fail)
        cn_set_error(CN_ERR_OUT_OF_MEMORY, op, "could not allocate %zu bytes of tensor data; "
                     "free tensors you no longer need (cn_release, scopes)", nbytes);
    if (fail || cn__scope_register(t) != CN_OK) { /* the scope sets its own error */
        spare.items[spare.count++] = t;
        *failed = 1;
        return NULL;
    }
    atomic_store_explicit(&t->refcount, 1, memory_order_relaxed);
    t->offset = 0;
    t->scope_kept = 0;
    t->storage->version = 0;
    return t;
}

cn_tensor *cn__tensor_alloc_routed(const char *op, const cn_backend *b, const int64_t *shape,
                                   int ndim, cn_dtype dtype, cn_device device) {
    int64_t strides[CN_MAX_DIMS], numel;
    size_t esize = cn__dtype_size(dtype), nbytes;
    /* a multiplication checked for overflow, not a division: this runs on every op */
    if (cn__contiguous_strides(shape, ndim, strides, &numel) != CN_OK ||
        __builtin_mul_overflow((size_t)numel, esize, &nbytes) || nbytes > SIZE_MAX / 2) {
        char buf[160];
        cn_set_error(CN_ERR_OVERFLOW, op, "shape %s of %s has too many elements (the byte size "
                     "overflows); check the shape for a mistake",
                     cn__shape_str(shape, ndim, buf, sizeof buf), cn_dtype_name(dtype));
        return NULL;
    }
    cn_device concrete = device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    int failed = 0;
    cn_tensor *t = nbytes > 0 && nbytes <= SPARE_BYTES ? spare_reuse(op, concrete, nbytes, &failed)
                                                        : NULL;
    if (failed) return NULL;
    if (t) {
        for (int d = ndim; d < t->ndim; d++) t->shape[d] = t->strides[d] = 0; /* as if new */
        cn__count_tensor(1, (int64_t)nbytes);
    } else {
        cn_storage *s = storage_new(op, b, concrete, nbytes);
        if (!s) return NULL;
        if (!(t = header_new(op))) {
            storage_free_data(s);
            cache_put(&storage_cache, s);
            return NULL;
        }
        t->storage = s;
        cn__count(CN__BYTES, (int64_t)nbytes);
    }
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->strides[d] = strides[d];
    }
    t->numel = numel;
    t->device = device; /* an autodiff device stays visible; the storage is on the concrete one */
    return t;
}

/* ---- caller-owned memory ------------------------------------------------------------------ */

/* storage_new's allocator for memory the caller already has: hands back its address (ctx). */
static cn_status caller_memory(void *ctx, int device, size_t nbytes, void **ptr) {
    (void)device;
    (void)nbytes;
    *ptr = ctx;
    return CN_OK;
}

cn_tensor *cn__tensor_external(const char *op, void *data, size_t nbytes, const int64_t *shape,
                               const int64_t *strides, int ndim, int64_t numel, cn_dtype dtype,
                               cn_device device, void (*deleter)(void *data, void *ctx),
                               void *ctx) {
    cn_device concrete = device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    const cn_backend give = {.ctx = data, .alloc = caller_memory};
    cn_storage *s = storage_new(op, &give, concrete, nbytes);
    if (!s) return NULL;
    cn_tensor *t = header_new(op);
    if (!t) { /* the record goes back; the memory stays the caller's */
        cache_put(&storage_cache, s);
        return NULL;
    }
    s->external = 1;
    s->backend = NULL; /* not `give`, which dies here: the deleter frees external memory */
    s->deleter = deleter;
    s->deleter_ctx = ctx;
    t->storage = s;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->strides[d] = strides[d];
    }
    t->numel = numel;
    t->device = device; /* an autodiff device stays visible, as in cn__tensor_alloc_routed */
    cn__count(CN__BYTES, (int64_t)nbytes);
    return t;
}

cn_tensor *cn__tensor_view(cn_tensor *src, const int64_t *shape, const int64_t *strides, int ndim,
                           int64_t offset) {
    cn_tensor *t = header_new("view");
    if (!t) return NULL;
    t->dtype = src->dtype;
    t->ndim = ndim;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->strides[d] = strides[d];
        if (shape[d] == 0) numel = 0;
    }
    /* a view has at most its source's elements, so only an empty one's sizes can multiply past
     * int64: it is known to be empty before the product */
    for (int d = 0; d < ndim && numel; d++) numel *= shape[d];
    t->numel = numel;
    t->offset = offset;
    t->device = src->device;
    t->storage = src->storage;
    cn__ref_take(&t->storage->refcount);
    return t;
}

/* ---- references --------------------------------------------------------------------------- */

cn_tensor *cn_retain(cn_tensor *t) {
    CN__CHECK_LIVE("retain", t);
    if (t) cn__ref_take(&t->refcount);
    return t;
}

void cn_release(cn_tensor *t) {
    if (!t) return;
    CN__CHECK_LIVE("release", t);
    if (!cn__ref_drop(&t->refcount)) return;
    cn__scope_forget(t);
    if (t->autograd) {
        cn__autograd_free_fn free_node =
            atomic_load_explicit(&cn__autograd_free, memory_order_relaxed);
        if (free_node) free_node(t);
    }
    if (spare_keep(t)) {
        cn__count_tensor(-1, -(int64_t)t->storage->nbytes);
        return;
    }
    cn__count(CN__TENSORS, -1);
    storage_release(t->storage);
    header_free(t);
}

/* "[2, 3] f32 cpu:0": cn_tensor_str without its checks, so that a misuse message can describe a
 * released tensor (its header is quarantined intact). */
static const char *describe(const cn_tensor *t, char *buf, size_t size) {
    char shape[128], dev[64];
    snprintf(buf, size, "%s %s %s", cn__shape_str(t->shape, t->ndim, shape, sizeof shape),
             cn_dtype_name(t->dtype), cn_device_str(t->device, dev, sizeof dev));
    return buf;
}

#ifdef CINDER_CHECK_MISUSE
void cn__misuse(const char *op, const cn_tensor *t, const char *what) {
    char desc[256];
    fprintf(stderr, "cinder: misuse in %s: tensor #%llu %s (%p) %s\n", op,
            (unsigned long long)t->serial, describe(t, desc, sizeof desc), (const void *)t, what);
    fflush(stderr);
    abort();
}

void cn__misuse_dead(const char *op, const cn_tensor *t) {
    if (t->live == CN__DEAD)
        cn__misuse(op, t, "was already released: released twice, or used after cn_release or "
                   "after the scope that owned it ended (cn_retain or cn_keep it to use it "
                   "longer)");
    fprintf(stderr, "cinder: misuse in %s: %p is not a live tensor (a dangling or corrupt "
            "pointer)\n", op, (const void *)t);
    fflush(stderr);
    abort();
}
#endif

/* ---- metadata ----------------------------------------------------------------------------- */

int cn_ndim(const cn_tensor *t) {
    CN__CHECK_LIVE("ndim", t);
    return t ? t->ndim : -1;
}
const int64_t *cn_shape(const cn_tensor *t) {
    CN__CHECK_LIVE("shape", t);
    return t ? t->shape : NULL;
}
const int64_t *cn_strides(const cn_tensor *t) {
    CN__CHECK_LIVE("strides", t);
    return t ? t->strides : NULL;
}
int64_t cn_numel(const cn_tensor *t) {
    CN__CHECK_LIVE("numel", t);
    return t ? t->numel : -1;
}
cn_dtype cn_dtype_of(const cn_tensor *t) {
    CN__CHECK_LIVE("dtype_of", t);
    return t ? t->dtype : CN_DTYPE_COUNT;
}
cn_kind cn_kind_of(const cn_tensor *t) {
    CN__CHECK_LIVE("kind_of", t);
    return t ? cn_dtype_kind(t->dtype) : CN_KIND_COUNT;
}

cn_device cn_device_of(const cn_tensor *t) {
    CN__CHECK_LIVE("device_of", t);
    if (t) return t->device;
    cn_device bad = {CN_BACKEND_INVALID, 0, 0, 0};
    return bad;
}

int cn_is_contiguous(const cn_tensor *t) {
    CN__CHECK_LIVE("is_contiguous", t);
    if (!t) return 0;
    if (t->numel == 0) return 1;
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect) return 0;
        expect *= t->shape[d];
    }
    return 1;
}

int cn_shares_memory(const cn_tensor *a, const cn_tensor *b) {
    CN__CHECK_LIVE("shares_memory", a);
    CN__CHECK_LIVE("shares_memory", b);
    return a && b && a->storage && a->storage == b->storage;
}

const char *cn_tensor_str(const cn_tensor *t, char *buf, size_t size) {
    CN__CHECK_LIVE("tensor_str", t);
    if (!t) {
        snprintf(buf, size, "NULL");
        return buf;
    }
    return describe(t, buf, size);
}
