/* cinder/cuda.h in a build without the CUDA backend (CINDER_CUDA=OFF, or no nvcc found): every
 * function exists, so programs link either way, and reports that the backend is not compiled in.
 * Built instead of the rest of this folder (cmake/CinderCuda.cmake). */
#include "cinder/cuda.h"

#define NOT_BUILT                                                                              \
    "this build of cinder has no CUDA backend; rebuild with -DCINDER_CUDA=ON on a machine "    \
    "with the CUDA toolkit, or use the cpu device"

static cn_status not_built(const char *op) {
    return cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, NOT_BUILT);
}

cn_status cn_cuda_memory_stats(int device, cn_cuda_memory_stats_t *out) {
    (void)device;
    (void)out;
    return not_built("cuda_memory_stats");
}

cn_status cn_cuda_reset_peak_memory_stats(int device) {
    (void)device;
    return not_built("cuda_reset_peak_memory_stats");
}

cn_status cn_cuda_empty_cache(int device) {
    (void)device;
    return not_built("cuda_empty_cache");
}

cn_status cn_cuda_synchronize(int device) {
    (void)device;
    return not_built("cuda_synchronize");
}

int cn_cuda_set_cudnn_enabled(int enabled) {
    (void)enabled;
    return 0;
}

int cn_cuda_cudnn_compiled(void) { return 0; }

const char *cn_cuda_unavailable_reason(void) { return NOT_BUILT; }
