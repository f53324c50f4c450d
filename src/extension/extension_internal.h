/* An extension op as the extension layer keeps it (registry.c defines ops, call.c calls them).
 * Only this layer reads it: the autodiff layer gets what a graph node needs of an op (its schema,
 * backward and a replay) handed in by call.c when it records a call. */
#ifndef CINDER_EXTENSION_INTERNAL_H
#define CINDER_EXTENSION_INTERNAL_H

#include <stdatomic.h>

#include "cinder/extension.h"
#include "dispatch/registry.h"

#define CN_EXT_MAX_PENDING 4

struct cn_ext_op {
    cn_ext_schema schema;                 /* a deep copy: every array and string is owned */
    /* Registered under the registry's lock and read without it, by any thread that calls the op:
     * atomic, so that a kernel registered while another thread calls the op is seen whole or not
     * at all (on x86 a load of one is a plain load). */
    _Atomic(cn_kernel_fn) kernels[CN_MAX_BACKENDS]; /* by backend id; NULL: not registered */
    _Atomic(cn_ext_backward_fn) backward;
    /* Kernels for backends not registered when they were given (a module not loaded yet: cuda
     * before the first GPU is asked for), by name, under the registry's lock: registering never
     * loads a module. Moved to kernels[] once their backend is registered. */
    struct {
        char backend[48];
        cn_kernel_fn kernel;
    } pending[CN_EXT_MAX_PENDING];
    _Atomic int n_pending; /* also read without the lock, to skip it when nothing waits */
};

/* The kernel of op for backend id, moving a kernel that waited for that backend into place
 * first; NULL when it has none (or id is out of range). */
cn_kernel_fn cn__ext_kernel(const cn_ext_op *op, int id);

#endif
