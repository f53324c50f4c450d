/* Activations as modules: ReLU, GELU (exact and tanh), Tanh, Sigmoid, SiLU. */
#include "core/alloc.h"
#include "nn/nn_internal.h"

static cn_tensor *activation_forward(cn_module *m, cn_tensor *x) {
    switch (*(const cn_activation *)cn_module_state(m)) {
    case CN_ACT_RELU:
        return cn_relu(x);
    case CN_ACT_GELU:
        return cn_gelu(x, CN_GELU_ERF);
    case CN_ACT_GELU_TANH:
        return cn_gelu(x, CN_GELU_TANH);
    case CN_ACT_TANH:
        return cn_tanh(x);
    case CN_ACT_SIGMOID:
        return cn_sigmoid(x);
    default:
        return cn_silu(x);
    }
}

static void free_state(void *state) { cn__free(state); }

/* One vtable per kind, so messages and cn_module_kind name the activation as PyTorch does. */
static const cn_module_vtable vtables[CN_ACT_COUNT] = {
    {"ReLU", activation_forward, NULL, free_state},
    {"GELU", activation_forward, NULL, free_state},
    {"GELU(tanh)", activation_forward, NULL, free_state},
    {"Tanh", activation_forward, NULL, free_state},
    {"Sigmoid", activation_forward, NULL, free_state},
    {"SiLU", activation_forward, NULL, free_state},
};

int nn_is_relu(const cn_module *m) { return m->vt == &vtables[CN_ACT_RELU]; }

cn_module *cn_activation_new(cn_activation act) {
    const char *op = "activation_new";
    if ((int)act < 0 || act >= CN_ACT_COUNT) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "activation %d is unknown; use one of CN_ACT_RELU .. "
                     "CN_ACT_SILU",
                     (int)act);
        return NULL;
    }
    cn_activation *s = cn__malloc(op, sizeof *s);
    if (!s) return NULL;
    *s = act;
    return cn_module_new(&vtables[act], s);
}
