/* A backend module as a program would ship one: libcinder_mock.so, a host-memory backend named
 * "mock" with one kernel (add of contiguous f32), reaching cinder only through the services it is
 * handed. Built three ways (tests/CMakeLists.txt):
 *   MOCK_NAME "mock"                  the good module
 *   MOCK_ABI  <other version>         built against another backend ABI: must be refused
 *   MOCK_NO_ENTRY                     exports no cn_backend_module_init: must be refused */
#include <string.h>

#include "cinder/backend.h"

#ifndef MOCK_NAME
#define MOCK_NAME "mock"
#endif
#ifndef MOCK_ABI
#define MOCK_ABI CN_BACKEND_ABI_VERSION
#endif

static const cn_backend_host *host;

static int device_count(void *ctx) {
    (void)ctx;
    return 1;
}

static cn_status alloc(void *ctx, int device, size_t nbytes, void **ptr) {
    (void)ctx, (void)device;
    *ptr = host->malloc("mock alloc", nbytes ? nbytes : 1);
    return *ptr ? CN_OK : CN_ERR_OUT_OF_MEMORY;
}

static void release(void *ctx, int device, void *ptr) {
    (void)ctx, (void)device;
    host->free(ptr);
}

static cn_status copy(void *ctx, int device, void *dst, const void *src, size_t nbytes) {
    (void)ctx, (void)device;
    if (nbytes) memcpy(dst, src, nbytes);
    return CN_OK;
}

/* out = a + b, every view contiguous f32 of one shape (anything else: a clear error). */
static cn_status add(const cn_kernel_args *a) {
    const cn_view *o = &a->out[0], *x = &a->in[0], *y = &a->in[1];
    int64_t n = 1, expect = 1;
    for (int d = o->ndim - 1; d >= 0; d--) {
        if (x->strides[d] != expect || y->strides[d] != expect)
            return host->set_error(CN_ERR_NO_KERNEL, "add", "the mock backend adds only "
                                   "contiguous tensors; call cn_contiguous first");
        expect *= o->shape[d];
        n *= o->shape[d];
    }
    if (o->dtype != CN_F32)
        return host->set_error(CN_ERR_NO_KERNEL, "add", "the mock backend adds only f32, not %s",
                               host->dtype_name(o->dtype));
    for (int64_t i = 0; i < n; i++)
        ((float *)o->data)[i] = ((const float *)x->data)[i] + ((const float *)y->data)[i];
    return CN_OK;
}

static const char *unavailable(void) { return ""; }

static cn_backend table;
static cn_backend_module module;

/* Without the entry: the same function under another name. */
#ifdef MOCK_NO_ENTRY
#define MOCK_ENTRY mock_module_init_misnamed
#else
#define MOCK_ENTRY cn_backend_module_init
#endif

CN_API const cn_backend_module *MOCK_ENTRY(const cn_backend_host *h);
CN_API const cn_backend_module *MOCK_ENTRY(const cn_backend_host *h) {
    host = h;
    table.name = MOCK_NAME;
    table.device_count = device_count;
    table.alloc = alloc;
    table.free = release;
    table.copy_from_host = copy;
    table.copy_to_host = copy;
    table.kernels[CN_OP_ADD] = add;
    module.abi_version = MOCK_ABI;
    module.backend = &table;
    module.unavailable_reason = unavailable;
    return &module;
}
