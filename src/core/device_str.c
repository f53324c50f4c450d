/* Device names: "cpu:0", "autodiff(cuda:1, balanced)". */
#include <stdatomic.h>
#include <stdio.h>

#include "cinder/device.h"
#include "core/device_str.h"

/* Each registered backend's name, by id; NULL: no backend has that id (yet). The CPU is always
 * id 0 (CN_BACKEND_CPU) and is registered before anything can be asked of the registry, so its
 * name is known from the start, as the registry would give it. A name is written (release) before
 * the registry publishes its id, and read with acquire: a reader that sees a name sees it whole. */
static _Atomic(const char *) names[CN__MAX_BACKENDS] = {"cpu"};

void cn__backend_name_set(int id, const char *name) {
    if (id < 0 || id >= CN__MAX_BACKENDS) return;
    atomic_store_explicit(&names[id], name, memory_order_release);
}

/* The name of backend id, or "invalid" when no backend has that id. */
static const char *backend_name(int id) {
    const char *name = id >= 0 && id < CN__MAX_BACKENDS
                           ? atomic_load_explicit(&names[id], memory_order_acquire)
                           : NULL;
    return name ? name : "invalid";
}

const char *cn_device_str(cn_device d, char *buf, size_t size) {
    const char *name = backend_name(d.backend);
    if (d.autodiff && d.checkpoint)
        snprintf(buf, size, "autodiff(%s:%d, balanced)", name, d.index);
    else if (d.autodiff)
        snprintf(buf, size, "autodiff(%s:%d)", name, d.index);
    else if (d.checkpoint)
        snprintf(buf, size, "%s:%d (checkpoint set without autodiff)", name, d.index);
    else
        snprintf(buf, size, "%s:%d", name, d.index);
    return buf;
}
