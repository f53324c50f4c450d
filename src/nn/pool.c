/* MaxPool2d and AvgPool2d (torch.nn.MaxPool2d / AvgPool2d): pooling ops as modules. */
#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* x: [N, C, H, W] -> [N, C, OH, OW] */
static cn_tensor *max_forward(cn_module *m, cn_tensor *x) {
    return cn_max_pool2d(x, cn_module_state(m));
}

static cn_tensor *avg_forward(cn_module *m, cn_tensor *x) {
    return cn_avg_pool2d(x, cn_module_state(m));
}

static void free_state(void *state) { cn__free(state); }

static const cn_module_vtable max_vtable = {"MaxPool2d", max_forward, NULL, free_state};
static const cn_module_vtable avg_vtable = {"AvgPool2d", avg_forward, NULL, free_state};

int nn_is_max_pool2d(const cn_module *m) { return m->vt == &max_vtable; }

int64_t nn_max_pool2d_tiles(const cn_module *m) {
    if (m->vt != &max_vtable) return 0;
    const cn_pool2d_params *p = m->state;
    int64_t k = p->kernel[0];
    int square = p->kernel[1] == k && (p->stride[0] == k || p->stride[0] == 0) &&
                 (p->stride[1] == k || p->stride[1] == 0) && p->padding[0] == 0 &&
                 p->padding[1] == 0;
    return square && k >= 2 && k <= 15 ? k : 0;
}

/* The parameters are checked by the op at the first forward, where the input is known. */
static cn_module *pool_new(const char *op, const cn_module_vtable *vt, const cn_pool2d_params *p) {
    if (!p) {
        cn__null_arg(op, "p");
        return NULL;
    }
    cn_pool2d_params *s = cn__malloc(op, sizeof *s);
    if (!s) return NULL;
    *s = *p;
    return cn_module_new(vt, s);
}

cn_module *cn_max_pool2d_new(const cn_pool2d_params *p) {
    return pool_new("max_pool2d_new", &max_vtable, p);
}

cn_module *cn_avg_pool2d_new(const cn_pool2d_params *p) {
    return pool_new("avg_pool2d_new", &avg_vtable, p);
}
