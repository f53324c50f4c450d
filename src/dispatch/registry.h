/* The backend registry, as the router sees it. */
#ifndef CINDER_DISPATCH_REGISTRY_H
#define CINDER_DISPATCH_REGISTRY_H

#include "cinder/backend.h"

#define CN_MAX_BACKENDS 16

/* The table of a backend id, or NULL (registers the built-in backends on first use). */
const cn_backend *cn__backend(int id);

/* Checks that `device` names a registered backend and an available device index; sets the error
 * naming `op` otherwise. Returns the backend or NULL. */
const cn_backend *cn__backend_lookup(const char *op, cn_device device);

/* This thread's last successful lookup: nearly every op asks for the device of the one before.
 * A backend's table never moves and its device count is asked once, so the answer stays true. */
typedef struct cn__device_memo {
    cn_device device;
    const cn_backend *backend;
} cn__device_memo;
extern _Thread_local cn__device_memo cn__last_lookup;

/* cn__backend_lookup, answered from the memo when it can be. */
static inline const cn_backend *cn__backend_for_device(const char *op, cn_device device) {
    cn_device m = cn__last_lookup.device;
    if (cn__last_lookup.backend && m.backend == device.backend && m.index == device.index &&
        m.autodiff == device.autodiff && m.checkpoint == device.checkpoint)
        return cn__last_lookup.backend;
    return cn__backend_lookup(op, device);
}

#endif
