/* The backend registry, as the router sees it. */
#ifndef CINDER_DISPATCH_REGISTRY_H
#define CINDER_DISPATCH_REGISTRY_H

#include "cinder/backend.h"
#include "core/device_str.h"

#define CN_MAX_BACKENDS CN__MAX_BACKENDS /* core keeps a name per id (core/device_str.h) */

/* The table of a backend id, or NULL (registers the built-in backends on first use). */
const cn_backend *cn__backend(int id);

/* What the registry keeps beside a backend's table: where its module came from and what the module
 * said of itself (all zero for the CPU and for backends a program registers). */
typedef struct cn__backend_extra {
    char module[512];                        /* the module's file, "" if none */
    const char *(*unavailable_reason)(void); /* why no device, or NULL */
    const void *api;                         /* backend-specific functions, or NULL */
} cn__backend_extra;

/* The extra record of a backend id, or NULL. */
const cn__backend_extra *cn__backend_extra_of(int id);

/* Registers a table (copied) with its extra record (copied; NULL: none). Returns the id, or -1
 * with the error set naming op (name taken, table incomplete, registry full). */
int cn__backend_register(const char *op, const cn_backend *b, const cn__backend_extra *extra);

/* cn_backend_load, with errors naming op (modules.c). */
int cn__backend_load(const char *op, const char *name);

/* The usable device count of a backend id (asked once), 0 for an unknown id. */
int cn__backend_devices(int id);

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
