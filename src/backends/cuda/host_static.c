/* The host in libcinder_cuda.a: the archive is linked into a program together with libcinder.a,
 * whose cn_set_error, cn__malloc, ... the backend's code calls directly. Only the ABI version is
 * checked. */
#include "backends/cuda/cuda_internal.h"

int cu_host_attach(const cn_backend_host *h) {
    return h && h->abi_version == CN_BACKEND_ABI_VERSION;
}
