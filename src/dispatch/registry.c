/* The backend registry: a fixed table of vtables, indexed by backend id. The CPU registers itself
 * first (id 0); programs may add their own at run time. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/error_internal.h"
#include "dispatch/registry.h"

void cn__cpu_backend_fill(cn_backend *b);
#ifdef CINDER_HAVE_CUDA
void cn__cuda_backend_fill(cn_backend *b); /* src/backends/cuda: reports 0 devices without a GPU */
#endif

static cn_backend backends[CN_MAX_BACKENDS];
/* Each backend's device count, asked once: every op checks its device against it, and asking a
 * driver costs more than a tiny op. -1: not asked yet. */
static _Atomic int device_counts[CN_MAX_BACKENDS] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                     -1, -1, -1, -1, -1, -1, -1, -1};
_Static_assert(CN_MAX_BACKENDS == 16, "one -1 per backend above");
static int backend_count;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static atomic_int builtins_ready; /* set once register_builtins has run */

static void register_builtins(void) {
    cn__cpu_backend_fill(&backends[CN_BACKEND_CPU]);
    backend_count = 1;
#ifdef CINDER_HAVE_CUDA
    cn__cuda_backend_fill(&backends[backend_count++]);
#endif
    atomic_store_explicit(&builtins_ready, 1, memory_order_release);
}

/* Every op looks its backend up: after the first call this is one load, not pthread_once's
 * call. */
static void ensure_builtins(void) {
    if (!atomic_load_explicit(&builtins_ready, memory_order_acquire))
        pthread_once(&builtins_once, register_builtins);
}

const cn_backend *cn__backend(int id) {
    ensure_builtins();
    if (id < 0 || id >= backend_count) return NULL;
    return &backends[id];
}

const cn_backend *cn_backend_get(int id) { return cn__backend(id); }

int cn_backend_find(const char *name) {
    ensure_builtins();
    if (!name) return -1;
    for (int i = 0; i < backend_count; i++)
        if (strcmp(backends[i].name, name) == 0) return i;
    return -1;
}

int cn_backend_register(const cn_backend *b) {
    ensure_builtins();
    const char *op = "backend_register";
    if (!b || !b->name || !b->name[0]) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "the backend table or its name is NULL; give it a "
                     "non-empty name");
        return -1;
    }
    if (!b->device_count || !b->alloc || !b->free || !b->copy_from_host || !b->copy_to_host) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "backend '%s' lacks a memory function (device_count, "
                     "alloc, free, copy_from_host and copy_to_host are required)", b->name);
        return -1;
    }
    pthread_mutex_lock(&registry_lock);
    int id = -1;
    if (cn_backend_find(b->name) >= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "a backend named '%s' is already registered; choose "
                     "another name", b->name);
    } else if (backend_count == CN_MAX_BACKENDS) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "the registry is full (%d backends); register fewer "
                     "backends", CN_MAX_BACKENDS);
    } else {
        id = backend_count;
        backends[id] = *b;
        backend_count++;
    }
    pthread_mutex_unlock(&registry_lock);
    return id;
}

_Thread_local cn__device_memo cn__last_lookup;

const cn_backend *cn__backend_lookup(const char *op, cn_device device) {
    ensure_builtins();
    const cn_backend *b =
        device.backend >= 0 && device.backend < backend_count ? &backends[device.backend] : NULL;
    if (!b) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "backend id %d is not registered (an invalid "
                     "device, e.g. from a bad CINDER_DEVICE); use cn_cpu() or cn_device_parse",
                     device.backend);
        return NULL;
    }
    int count = atomic_load_explicit(&device_counts[device.backend], memory_order_relaxed);
    if (count < 0) {
        count = b->device_count(b->ctx);
        atomic_store_explicit(&device_counts[device.backend], count, memory_order_relaxed);
    }
    if (device.index < 0 || device.index >= count) {
        cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "device %s:%d is not available (%d device%s "
                     "of backend '%s' usable here); pick another device, e.g. cpu", b->name,
                     device.index, count, count == 1 ? "" : "s", b->name);
        return NULL;
    }
    cn__last_lookup.device = device;
    cn__last_lookup.backend = b;
    return b;
}
