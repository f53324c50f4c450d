/* The extension registry, as the router and the autodiff layer see it. */
#ifndef CINDER_EXTENSION_INTERNAL_H
#define CINDER_EXTENSION_INTERNAL_H

#include "cinder/extension.h"
#include "dispatch/registry.h"

struct cn_ext_op {
    cn_ext_schema schema;                 /* a deep copy: every array and string is owned */
    cn_kernel_fn kernels[CN_MAX_BACKENDS];/* by backend id; NULL: not registered */
    cn_ext_backward_fn backward;
};

#endif
