/* cinder: the CUDA backend's own controls: memory statistics of its caching allocator, the
 * cache itself, synchronisation and the cuDNN switch.
 *
 * Tensors on a GPU are made like any others, on the device "cuda" or "cuda:N" (device.h):
 *
 *     cn_device gpu;
 *     if (cn_device_parse("cuda:0", &gpu) != CN_OK) ...       // no GPU, or no CUDA in this build
 *     cn_tensor *x = cn_to_device(host_tensor, gpu);
 *
 * Kernels run asynchronously on one stream per device, in the order they are called; reading a
 * tensor (cn_read, cn_to_device to another device) waits for them. Freed device memory goes back
 * to a cache that later allocations of the same size class reuse (as in PyTorch), so the driver is
 * asked for memory rarely; cn_cuda_empty_cache returns the cache to the driver.
 *
 * The backend is a module, libcinder_cuda.so, that libcinder loads the first time a CUDA device
 * or one of these functions is asked for (cinder/backend.h says where it looks); libcinder itself
 * links no CUDA library. These functions exist in every build of libcinder. When the module is
 * not found they fail with CN_ERR_UNKNOWN_DEVICE, naming each place looked at; on a device index
 * that is not usable here (no GPU, no driver), CN_ERR_DEVICE_UNAVAILABLE.
 *
 * A program linked statically can link the backend in instead: link libcinder_cuda.a (CMake:
 * cinder::cuda_static) with its CUDA libraries and, before using a CUDA device, call
 *
 *     cn_backend_add_module(cn_cuda_backend_module);
 *
 * Threads: any thread may call these; the statistics are per device, process-wide. */
#ifndef CINDER_CUDA_H
#define CINDER_CUDA_H

#include "cinder/api.h"

#include <stdint.h>

#include "cinder/backend.h"
#include "cinder/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The caching allocator's counters for one device. Byte counts are for tensor storage and kernel
 * scratch memory; cuBLAS and cuDNN keep their own workspaces outside the cache. */
typedef struct cn_cuda_memory_stats_t {
    int64_t bytes_in_use;        /* bytes of live allocations, as requested */
    int64_t peak_bytes_in_use;   /* high-water mark of bytes_in_use (since start or reset) */
    int64_t bytes_cached;        /* bytes in freed blocks that the cache keeps for reuse */
    int64_t bytes_reserved;      /* bytes held from the driver: live blocks (rounded up to their
                                  * size class) plus cached blocks */
    int64_t peak_bytes_reserved; /* high-water mark of bytes_reserved */
    int64_t alloc_count;         /* allocations served */
    int64_t cache_hits;          /* of those, served from the cache without the driver */
    int64_t driver_allocs;       /* cudaMalloc calls that succeeded */
    int64_t driver_frees;        /* cudaFree calls (cache emptied, or an OOM retry) */
    int64_t oom_count;           /* allocations that failed even after emptying the cache */
} cn_cuda_memory_stats_t;

/* Writes device `device`'s allocator counters into *out. */
CN_API cn_status cn_cuda_memory_stats(int device, cn_cuda_memory_stats_t *out);

/* Sets the peaks to the current values. */
CN_API cn_status cn_cuda_reset_peak_memory_stats(int device);

/* Waits for the device's queued work, then returns every cached block to the driver. Live
 * tensors are untouched. */
CN_API cn_status cn_cuda_empty_cache(int device);

/* Waits until every kernel queued on the device has finished. An error of an earlier
 * asynchronous kernel is reported here (CN_ERR_BACKEND, with CUDA's message). */
CN_API cn_status cn_cuda_synchronize(int device);

/* ---- for extension kernels (docs/extensions.md, examples/extension) ----------------------------
 *
 * A CUDA kernel of an extension op (<ext>_<op>_cuda) receives device pointers in its views and
 * runs its work on the backend's stream, so that it is ordered with cinder's own kernels before
 * and after it: no synchronisation is needed, and its scratch memory can be freed in stream order
 * (cudaFreeAsync on that stream). */

/* Writes into *stream the cudaStream_t (as a void *) on which the backend queues all work of
 * device `device`, and makes that device current on the calling thread, so that the caller's own
 * launches go to it. The stream lives until the process ends; do not destroy it. CN_OK;
 * CN_ERR_NULL_ARG for a NULL stream; CN_ERR_DEVICE_UNAVAILABLE for a device index that is not
 * usable here; CN_ERR_UNKNOWN_DEVICE when the CUDA module is not found. Any thread. */
CN_API cn_status cn_cuda_stream(int device, void **stream);

/* The GEMM of cinder's CUDA kernels, for extension kernels: c = a @ b + beta * c on device memory
 * of `device`, row-major, with the arguments of cn_cpu_gemm (cinder/backend.h) and the same
 * checks and errors, plus dtypes f16 and bf16 (f32 sums, one rounding to c). cuBLAS on the
 * backend's stream: it returns once the product is queued. f32 is plain FP32 (no TF32), as
 * cn_matmul on CUDA. CN_ERR_BACKEND with cuBLAS's status when the library refuses the call;
 * CN_ERR_DEVICE_UNAVAILABLE for a device index that is not usable here. Any thread, on disjoint
 * c. */
CN_API cn_status cn_cuda_gemm(int device, cn_dtype dtype, int ta, int tb, int64_t m, int64_t n,
                              int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                              double beta, void *c, int64_t ldc);

/* Whether convolutions may use cuDNN (when cinder was built with it): 1 = yes (the default),
 * 0 = use cinder's own im2col + cuBLAS kernels. Returns the previous setting. Process-wide. */
CN_API int cn_cuda_set_cudnn_enabled(int enabled);

/* Non-zero when this build has the CUDA backend and it was linked with cuDNN. */
CN_API int cn_cuda_cudnn_compiled(void);

/* The CUDA backend's module entry, defined only in libcinder_cuda.a (and inside the shared
 * module, which exports it as cn_backend_module_init): pass it to cn_backend_add_module. */
CN_API const cn_backend_module *cn_cuda_backend_module(const cn_backend_host *host);

/* Why the CUDA backend sees no device ("" when it sees one): CUDA's message from
 * cudaGetDeviceCount, or why its module could not be loaded. Valid until the next call on this
 * thread. */
CN_API const char *cn_cuda_unavailable_reason(void);

#ifdef __cplusplus
}
#endif
#endif
