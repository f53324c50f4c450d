/* The backend registry, as the router sees it. */
#ifndef CINDER_DISPATCH_REGISTRY_H
#define CINDER_DISPATCH_REGISTRY_H

#include "cinder/backend.h"

#define CN_MAX_BACKENDS 16

/* The table of a backend id, or NULL (registers the built-in backends on first use). */
const cn_backend *cn__backend(int id);

/* Checks that `device` names a registered backend and an available device index; sets the error
 * naming `op` otherwise. Returns the backend or NULL. */
const cn_backend *cn__backend_for_device(const char *op, cn_device device);

#endif
