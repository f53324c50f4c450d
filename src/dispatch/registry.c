/* The backend registry: a fixed table of vtables, indexed by backend id. The CPU registers itself
 * first (id 0); modules (modules.c) and programs add theirs at run time. Each backend's name is
 * also given to core (core/device_str.h), which names devices without calling up here.
 *
 * Threads: registration is serialised by a lock; readers take no lock. A table is written before
 * the count that makes it visible is published (release), and readers load the count with
 * acquire, so a reader that sees an id sees its whole table. Tables never move or change. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/error_internal.h"
#include "dispatch/registry.h"

void cn__cpu_backend_fill(cn_backend *b);

static cn_backend backends[CN_MAX_BACKENDS];
static cn__backend_extra extras[CN_MAX_BACKENDS];
/* Each backend's device count, asked once: every op checks its device against it, and asking a
 * driver costs more than a tiny op. -1: not asked yet. */
static _Atomic int device_counts[CN_MAX_BACKENDS] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                     -1, -1, -1, -1, -1, -1, -1, -1};
_Static_assert(CN_MAX_BACKENDS == 16, "one -1 per backend above");
static atomic_int backend_count; /* published with release after the table is written */
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static void register_builtins(void) {
    cn__cpu_backend_fill(&backends[CN_BACKEND_CPU]);
    cn__backend_name_set(CN_BACKEND_CPU, backends[CN_BACKEND_CPU].name);
    atomic_store_explicit(&backend_count, 1, memory_order_release);
}

/* Every op looks its backend up: after the first call this is one load, not pthread_once's
 * call. */
static int registered(void) {
    int n = atomic_load_explicit(&backend_count, memory_order_acquire);
    if (n) return n;
    pthread_once(&builtins_once, register_builtins);
    return atomic_load_explicit(&backend_count, memory_order_acquire);
}

const cn_backend *cn__backend(int id) {
    if (id < 0 || id >= registered()) return NULL;
    return &backends[id];
}

const cn__backend_extra *cn__backend_extra_of(int id) {
    if (id < 0 || id >= registered()) return NULL;
    return &extras[id];
}

const cn_backend *cn_backend_get(int id) { return cn__backend(id); }

int cn_backend_find(const char *name) {
    int n = registered();
    if (!name) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(backends[i].name, name) == 0) return i;
    return -1;
}

int cn__backend_register(const char *op, const cn_backend *b, const cn__backend_extra *extra) {
    registered();
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
    int n = atomic_load_explicit(&backend_count, memory_order_relaxed);
    if (cn_backend_find(b->name) >= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "a backend named '%s' is already registered; choose "
                     "another name", b->name);
    } else if (n == CN_MAX_BACKENDS) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "the registry is full (%d backends); register fewer "
                     "backends", CN_MAX_BACKENDS);
    } else {
        id = n;
        backends[id] = *b;
        if (extra) extras[id] = *extra;
        cn__backend_name_set(id, b->name);
        atomic_store_explicit(&backend_count, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&registry_lock);
    return id;
}

int cn_backend_register(const cn_backend *b) {
    return cn__backend_register("backend_register", b, NULL);
}

int cn__backend_devices(int id) {
    const cn_backend *b = cn__backend(id);
    if (!b) return 0;
    int count = atomic_load_explicit(&device_counts[id], memory_order_relaxed);
    if (count < 0) {
        count = b->device_count(b->ctx);
        atomic_store_explicit(&device_counts[id], count, memory_order_relaxed);
    }
    return count;
}

_Thread_local cn__device_memo cn__last_lookup;

const cn_backend *cn__backend_lookup(const char *op, cn_device device) {
    const cn_backend *b = cn__backend(device.backend);
    if (!b) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "backend id %d is not registered (an invalid "
                     "device, e.g. from a bad CINDER_DEVICE); use cn_cpu() or cn_device_parse",
                     device.backend);
        return NULL;
    }
    int count = cn__backend_devices(device.backend);
    if (device.index < 0 || device.index >= count) {
        const cn__backend_extra *x = &extras[device.backend];
        const char *why = x->unavailable_reason ? x->unavailable_reason() : "";
        cn_set_error(CN_ERR_DEVICE_UNAVAILABLE, op, "device %s:%d is not available (%d device%s "
                     "of backend '%s' usable here%s%s); pick another device, e.g. cpu", b->name,
                     device.index, count, count == 1 ? "" : "s", b->name, why && why[0] ? ": " : "",
                     why ? why : "");
        return NULL;
    }
    cn__last_lookup.device = device;
    cn__last_lookup.backend = b;
    return b;
}
