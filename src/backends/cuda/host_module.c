/* The host services in libcinder_cuda.so. The backend's code calls cinder's functions by their
 * usual names (cn_set_error, cn__malloc, cn_dtype_size, ...); in the shared module these are the
 * definitions below, which forward to the services cinder handed cn_backend_module_init. So the
 * module needs no symbol of libcinder, and works in a program linked with libcinder.a as well as
 * with libcinder.so. The module's version script exports cn_backend_module_init alone, so none of
 * these names is visible outside it. */
#include <stdarg.h>
#include <stdio.h>

#include "backends/cuda/cuda_internal.h"
#include "core/alloc.h"

static const cn_backend_host *host;

int cu_host_attach(const cn_backend_host *h) {
    if (!h || h->abi_version != CN_BACKEND_ABI_VERSION) return 0;
    host = h;
    return 1;
}

/* The one entry point of the module (cinder/backend.h), its one exported symbol. */
CN_API const cn_backend_module *cn_backend_module_init(const cn_backend_host *h);
const cn_backend_module *cn_backend_module_init(const cn_backend_host *h) {
    return cn_cuda_backend_module(h);
}

cn_status cn_set_error(cn_status s, const char *op, const char *fmt, ...) {
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return host->set_error(s, op, "%s", detail);
}

cn_status cn_last_status(void) { return host->last_status(); }
void cn_clear_error(void) { host->clear_error(); }
size_t cn_dtype_size(cn_dtype dt) { return host->dtype_size(dt); }
const char *cn_dtype_name(cn_dtype dt) { return host->dtype_name(dt); }
const char *cn_op_name(cn_op op) {
    return host->op_name(op);
}
void *cn__malloc(const char *op, size_t nbytes) { return host->malloc(op, nbytes); }
void *cn__calloc(const char *op, size_t count, size_t size) {
    return host->calloc(op, count, size);
}
void cn__free(void *p) { host->free(p); }
int cn__alloc_should_fail(void) { return host->alloc_should_fail(); }
