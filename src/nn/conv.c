/* Conv2d (torch.nn.Conv2d): a convolution with a learned kernel and bias. */
#include <math.h>

#include "core/alloc.h"
#include "nn/nn_internal.h"

typedef struct conv_state {
    cn_tensor *weight; /* [out, in / groups, kh, kw], borrowed from the module's parameters */
    cn_tensor *bias;   /* [out] or NULL */
    cn_conv2d_params p;
} conv_state;

/* x: [N, in, H, W] -> [N, out, OH, OW] */
static cn_tensor *conv_forward(cn_module *m, cn_tensor *x) {
    conv_state *s = cn_module_state(m);
    return cn_conv2d(x, s->weight, s->bias, &s->p);
}

static void free_state(void *state) { cn__free(state); }

static const cn_module_vtable conv_vtable = {"Conv2d", conv_forward, NULL, free_state};

int nn_is_conv2d(const cn_module *m) { return m->vt == &conv_vtable; }

cn_tensor *nn_conv2d_relu_forward(cn_module *m, cn_tensor *x) {
    conv_state *s = cn_module_state(m);
    return cn_conv2d_relu(x, s->weight, s->bias, &s->p);
}

cn_tensor *nn_conv2d_max_pool2d_forward(cn_module *m, cn_tensor *x, int64_t k) {
    conv_state *s = cn_module_state(m);
    return cn_conv2d_max_pool2d(x, s->weight, s->bias, &s->p, k);
}

cn_module *cn_conv2d_new(int64_t in_channels, int64_t out_channels, int64_t kernel_h,
                         int64_t kernel_w, const cn_conv2d_params *p, int bias, cn_device device,
                         cn_dtype dtype, cn_generator *gen) {
    const char *op = "conv2d_new";
    cn_conv2d_params params = {{1, 1}, {0, 0}, {1, 1}, 1};
    if (p) params = *p;
    int64_t groups = params.groups ? params.groups : 1;
    if (nn_check_positive(op, "in_channels", in_channels) != CN_OK ||
        nn_check_positive(op, "out_channels", out_channels) != CN_OK ||
        nn_check_positive(op, "kernel_h", kernel_h) != CN_OK ||
        nn_check_positive(op, "kernel_w", kernel_w) != CN_OK ||
        nn_check_positive(op, "groups", groups) != CN_OK ||
        nn_check_float_dtype(op, dtype) != CN_OK)
        return NULL;
    if (in_channels % groups || out_channels % groups) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "in_channels = %lld and out_channels = %lld must "
                     "both be multiples of groups = %lld",
                     (long long)in_channels, (long long)out_channels, (long long)groups);
        return NULL;
    }
    conv_state *s = cn__calloc(op, 1, sizeof *s);
    if (!s) return NULL;
    s->p = params;
    cn_module *m = cn_module_new(&conv_vtable, s);
    if (!m) return NULL;
    /* PyTorch's reset_parameters: bound 1/sqrt(fan_in) for weight and bias */
    int64_t fan_in = in_channels / groups * kernel_h * kernel_w;
    double bound = 1.0 / sqrt((double)fan_in);
    const int64_t wshape[4] = {out_channels, in_channels / groups, kernel_h, kernel_w};
    s->weight = nn_uniform_param(wshape, 4, bound, device, dtype, gen);
    m = nn_with_param(m, "weight", s->weight);
    if (m && bias) {
        s->bias = nn_uniform_param(&out_channels, 1, bound, device, dtype, gen);
        m = nn_with_param(m, "bias", s->bias);
    }
    return m;
}
