/* Shared by the files of src/nn: the module layout and small helpers. */
#ifndef CINDER_NN_INTERNAL_H
#define CINDER_NN_INTERNAL_H

#include "cinder/memory.h"
#include "cinder/nn.h"

typedef struct nn_named {
    char *name;
    cn_tensor *tensor; /* a reference owned by the module, in no scope */
} nn_named;

typedef struct nn_child {
    char *name;
    cn_module *module;
} nn_child;

/* A growable list of named tensors, and the flattened view of a module tree that
 * cn_module_params / cn_module_buffers hand out (names "<child>.<name>", owned by the list). */
typedef struct nn_list {
    nn_named *items;
    int count, cap;
} nn_list;

typedef struct nn_flat {
    cn_param *items;
    int count;
} nn_flat;

struct cn_module {
    const cn_module_vtable *vt;
    void *state;
    int training;
    nn_list params, buffers;
    nn_child *children;
    int n_children, cap_children;
    nn_flat flat_params, flat_buffers;
};

/* Takes t out of every scope: the caller's reference becomes one no scope releases (for module
 * parameters and optimizer state). Returns t. */
cn_tensor *nn_unscoped(cn_tensor *t);

/* Checks a float dtype for a constructor; sets CN_ERR_DTYPE naming `op` otherwise. */
cn_status nn_check_float_dtype(const char *op, cn_dtype dtype);

/* Checks size >= 1 for a constructor argument; CN_ERR_INVALID_ARG naming it otherwise. */
cn_status nn_check_positive(const char *op, const char *arg, int64_t size);

/* A new parameter of `shape` on `device`, drawn from U(-bound, bound), tracked (a leaf) on an
 * autodiff device, owned by no scope. NULL with the error set on failure. */
cn_tensor *nn_uniform_param(const int64_t *shape, int ndim, double bound, cn_device device,
                            cn_dtype dtype, cn_generator *gen);

/* The same filled with `value` (tracked when `tracked` and the device is autodiff). */
cn_tensor *nn_full_param(const int64_t *shape, int ndim, double value, int tracked,
                         cn_device device, cn_dtype dtype);

/* Whether m is a Conv2d (nn/conv.c), a ReLU (nn/activation.c) or a MaxPool2d (nn/pool.c). */
int nn_is_conv2d(const cn_module *m);
int nn_is_relu(const cn_module *m);
int nn_is_max_pool2d(const cn_module *m);

/* k when m is a MaxPool2d of k x k windows at stride k, unpadded, 2 <= k <= 15 (what
 * conv2d_max_pool2d fuses), else 0. */
int64_t nn_max_pool2d_tiles(const cn_module *m);

/* A Conv2d module's forward followed by relu, or by a k x k max pool at stride k, as one fused
 * op (cn_conv2d_relu, cn_conv2d_max_pool2d): Sequential's forward for such children. */
cn_tensor *nn_conv2d_relu_forward(cn_module *conv, cn_tensor *x);
cn_tensor *nn_conv2d_max_pool2d_forward(cn_module *conv, cn_tensor *x, int64_t k);

/* Registers t (a parameter) or frees m and returns NULL: for constructors' chains. */
cn_module *nn_with_param(cn_module *m, const char *name, cn_tensor *t);
cn_module *nn_with_buffer(cn_module *m, const char *name, cn_tensor *t);

/* The gradient of t in grads, or NULL when it has none (without setting an error). */
cn_tensor *nn_grad_or_null(const cn_grads *grads, cn_tensor *t);

#endif
