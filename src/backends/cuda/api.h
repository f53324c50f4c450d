/* The functions of cinder/cuda.h as the CUDA module provides them. libcinder's own
 * cinder/cuda.h functions (src/dispatch/cuda_api.c) find the module's table through the registry
 * (cn_backend_module.api) and forward to it, so libcinder links no CUDA library. Plain C, no CUDA
 * header: both sides include it. Part of the module ABI: append only, and bump
 * CN_BACKEND_ABI_VERSION on a change. */
#ifndef CINDER_BACKENDS_CUDA_API_H
#define CINDER_BACKENDS_CUDA_API_H

#include "cinder/cuda.h"

typedef struct cu_api {
    cn_status (*memory_stats)(int device, cn_cuda_memory_stats_t *out);
    cn_status (*reset_peak_memory_stats)(int device);
    cn_status (*empty_cache)(int device);
    cn_status (*synchronize)(int device);
    int (*set_cudnn_enabled)(int enabled);
    int (*cudnn_compiled)(void);
    /* ABI 9: for extension kernels */
    cn_status (*stream)(int device, void **stream);
    cn_status (*gemm)(int device, cn_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k,
                      const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                      void *c, int64_t ldc);
} cu_api;

#endif
