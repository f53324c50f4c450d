/* Tensors over caller-owned memory, shared by cn_from_memory and cn_from_dlpack. */
#ifndef CINDER_DISPATCH_EXTERNAL_H
#define CINDER_DISPATCH_EXTERNAL_H

#include "cinder/interop.h"

/* How the caller names each argument in messages ("shape", "m->dl_tensor.shape"). */
typedef struct cn__memory_names {
    const char *data, *shape, *ndim, *strides;
} cn__memory_names;

/* cn_from_memory's checks and creation, with errors naming `op` and the arguments as `names`
 * says. On failure the deleter is not called and nothing is kept. */
cn_tensor *cn__from_memory(const char *op, const cn__memory_names *names, void *data,
                           const int64_t *shape, int ndim, const int64_t *strides, cn_dtype dtype,
                           cn_device device, cn_deleter deleter, void *ctx);

#endif
