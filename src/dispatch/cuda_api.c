/* cinder/cuda.h in libcinder: each function finds the CUDA backend (loading its module,
 * libcinder_cuda.so, on first use) and forwards to the module's table (backends/cuda/api.h).
 * libcinder itself links no CUDA library. */
#include <stdio.h>

#include "backends/cuda/api.h"
#include "core/error_internal.h"
#include "dispatch/registry.h"

/* The module's table, or NULL with the error set naming op. */
static const cu_api *cuda(const char *op) {
    int id = cn__backend_load(op, "cuda");
    if (id < 0) return NULL;
    const cn__backend_extra *x = cn__backend_extra_of(id);
    if (!x->api) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "the backend registered as 'cuda' is not cinder's "
                     "CUDA module (it has no cinder/cuda.h functions); load libcinder_cuda.so");
        return NULL;
    }
    return x->api;
}

cn_status cn_cuda_memory_stats(int device, cn_cuda_memory_stats_t *out) {
    const cu_api *a = cuda("cuda_memory_stats");
    return a ? a->memory_stats(device, out) : cn_last_status();
}

cn_status cn_cuda_reset_peak_memory_stats(int device) {
    const cu_api *a = cuda("cuda_reset_peak_memory_stats");
    return a ? a->reset_peak_memory_stats(device) : cn_last_status();
}

cn_status cn_cuda_empty_cache(int device) {
    const cu_api *a = cuda("cuda_empty_cache");
    return a ? a->empty_cache(device) : cn_last_status();
}

cn_status cn_cuda_synchronize(int device) {
    const cu_api *a = cuda("cuda_synchronize");
    return a ? a->synchronize(device) : cn_last_status();
}

cn_status cn_cuda_stream(int device, void **stream) {
    const cu_api *a = cuda("cuda_stream");
    return a ? a->stream(device, stream) : cn_last_status();
}

cn_status cn_cuda_gemm(int device, cn_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k,
                       const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                       void *c, int64_t ldc) {
    const cu_api *api = cuda("cuda_gemm");
    return api ? api->gemm(device, dtype, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc)
               : cn_last_status();
}

int cn_cuda_set_cudnn_enabled(int enabled) {
    cn__saved_error saved;
    cn__error_save(&saved);
    const cu_api *a = cuda("cuda_set_cudnn_enabled");
    cn__error_restore(&saved);
    return a ? a->set_cudnn_enabled(enabled) : 0;
}

int cn_cuda_cudnn_compiled(void) {
    cn__saved_error saved;
    cn__error_save(&saved);
    const cu_api *a = cuda("cuda_cudnn_compiled");
    cn__error_restore(&saved);
    return a ? a->cudnn_compiled() : 0;
}

const char *cn_cuda_unavailable_reason(void) {
    static _Thread_local char why[1024];
    cn_backend_status st;
    if (cn_backend_status_of("cuda", &st) != CN_OK) return "";
    snprintf(why, sizeof why, "%s", st.why);
    return why;
}
