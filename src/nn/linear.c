/* Linear: y = x W^T + b (torch.nn.Linear). */
#include <math.h>

#include "core/alloc.h"
#include "nn/nn_internal.h"

typedef struct linear_state {
    cn_tensor *weight; /* [out, in], borrowed from the module's parameters */
    cn_tensor *bias;   /* [out] or NULL */
} linear_state;

/* x: [..., in] -> [..., out] */
static cn_tensor *linear_forward(cn_module *m, cn_tensor *x) {
    linear_state *s = cn_module_state(m);
    return cn_linear(x, s->weight, s->bias);
}

static void free_state(void *state) { cn__free(state); }

static const cn_module_vtable linear_vtable = {"Linear", linear_forward, NULL, free_state};

cn_module *cn_linear_new(int64_t in_features, int64_t out_features, int bias, cn_device device,
                         cn_dtype dtype, cn_generator *gen) {
    const char *op = "linear_new";
    if (nn_check_positive(op, "in_features", in_features) != CN_OK ||
        nn_check_positive(op, "out_features", out_features) != CN_OK ||
        nn_check_float_dtype(op, dtype) != CN_OK)
        return NULL;
    linear_state *s = cn__calloc(op, 1, sizeof *s);
    if (!s) return NULL;
    cn_module *m = cn_module_new(&linear_vtable, s);
    if (!m) return NULL;
    /* PyTorch's reset_parameters: kaiming_uniform_(a = sqrt(5)) gives bound 1/sqrt(fan_in) for
     * the weight, and the bias uses the same bound */
    double bound = 1.0 / sqrt((double)in_features);
    const int64_t wshape[2] = {out_features, in_features};
    s->weight = nn_uniform_param(wshape, 2, bound, device, dtype, gen);
    m = nn_with_param(m, "weight", s->weight);
    if (m && bias) {
        s->bias = nn_uniform_param(&out_features, 1, bound, device, dtype, gen);
        m = nn_with_param(m, "bias", s->bias);
    }
    return m;
}
