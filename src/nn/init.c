/* Initialisers (torch.nn.init): fans, gains, and in-place draws from uniform and normal
 * distributions, plus the helpers constructors use to make their parameters. */
#include <math.h>

#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* ---- fans and gains -------------------------------------------------------------------------- */

cn_status cn_init_fans(const cn_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    const char *op = "init_fans";
    if (!t) {
        cn__null_arg(op, "t");
        return cn_last_status();
    }
    if (cn_ndim(t) < 2) {
        char buf[128];
        return cn_set_error(CN_ERR_SHAPE, op,
                            "'t' is %s; fans need at least 2 dims ([out, in, "
                            "...]); initialise vectors (biases) with cn_init_uniform_",
                            cn_tensor_str(t, buf, sizeof buf));
    }
    const int64_t *shape = cn_shape(t);
    int64_t receptive = 1;
    for (int d = 2; d < cn_ndim(t); d++)
        receptive *= shape[d];
    if (fan_in) *fan_in = shape[1] * receptive;
    if (fan_out) *fan_out = shape[0] * receptive;
    return CN_OK;
}

double cn_init_gain(cn_activation act) {
    switch (act) {
    case CN_ACT_RELU:
        return sqrt(2.0);
    case CN_ACT_TANH:
        return 5.0 / 3.0;
    case CN_ACT_SIGMOID:
        return 1.0;
    default:
        cn_set_error(CN_ERR_INVALID_ARG, "init_gain",
                     "activation %d has no recommended gain "
                     "(PyTorch defines none for GELU or SiLU); pass a gain of your choice, e.g. "
                     "1.0",
                     (int)act);
        return NAN;
    }
}

/* ---- drawing in place ------------------------------------------------------------------------ */

/* Draws in f64 for f64 tensors, in f32 otherwise (random kernels are float32/64). */
static cn_dtype draw_dtype(const cn_tensor *t) {
    return cn_dtype_of(t) == CN_F64 ? CN_F64 : CN_F32;
}

/* Writes src into t under no-grad mode (t may be a tracked parameter). Releases src. */
static cn_status overwrite(cn_tensor *t, cn_tensor *src) {
    if (!src) return cn_last_status();
    cn_no_grad_begin();
    cn_status s = cn_copy_(t, src);
    cn_no_grad_end();
    cn_release(src);
    return s;
}

static cn_status check_target(const char *op, cn_tensor *t, cn_generator *gen, int needs_gen) {
    if (!t || (needs_gen && !gen)) {
        cn__null_arg(op, !t ? "t" : "gen");
        return cn_last_status();
    }
    if (cn_kind_of(t) != CN_KIND_FLOAT) {
        char buf[128];
        return cn_set_error(CN_ERR_KIND, op, "'t' is %s; initialisers fill float tensors",
                            cn_tensor_str(t, buf, sizeof buf));
    }
    return CN_OK;
}

cn_status cn_init_uniform_(cn_tensor *t, double low, double high, cn_generator *gen) {
    const char *op = "init_uniform_";
    if (check_target(op, t, gen, 1) != CN_OK) return cn_last_status();
    if (low == high) return cn_init_constant_(t, low); /* cn_rand_uniform needs low < high */
    cn_tensor *r = cn_rand_uniform(gen, cn_shape(t), cn_ndim(t), low, high, draw_dtype(t),
                                   cn_inner_device(cn_device_of(t)));
    return overwrite(t, r);
}

cn_status cn_init_normal_(cn_tensor *t, double mean, double std, cn_generator *gen) {
    const char *op = "init_normal_";
    if (check_target(op, t, gen, 1) != CN_OK) return cn_last_status();
    cn_tensor *r = cn_rand_normal(gen, cn_shape(t), cn_ndim(t), mean, std, draw_dtype(t),
                                  cn_inner_device(cn_device_of(t)));
    return overwrite(t, r);
}

cn_status cn_init_constant_(cn_tensor *t, double value) {
    const char *op = "init_constant_";
    if (check_target(op, t, NULL, 0) != CN_OK) return cn_last_status();
    return overwrite(t, cn_full(NULL, 0, value, cn_dtype_of(t), cn_inner_device(cn_device_of(t))));
}

static cn_status fan_of(const char *op, cn_tensor *t, cn_fan_mode mode, int64_t *fan) {
    int64_t in = 0, out = 0;
    if (cn_init_fans(t, &in, &out) != CN_OK) return cn_last_status();
    *fan = mode == CN_FAN_OUT ? out : in;
    if (*fan < 1)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "the fan of 't' is 0 (an empty tensor); there is "
                            "nothing to initialise");
    return CN_OK;
}

cn_status cn_init_kaiming_uniform_(cn_tensor *t, double a, cn_fan_mode mode, cn_generator *gen) {
    const char *op = "init_kaiming_uniform_";
    int64_t fan = 0;
    if (check_target(op, t, gen, 1) != CN_OK || fan_of(op, t, mode, &fan) != CN_OK)
        return cn_last_status();
    double gain = sqrt(2.0 / (1.0 + a * a));
    double bound = gain * sqrt(3.0 / (double)fan);
    return cn_init_uniform_(t, -bound, bound, gen);
}

cn_status cn_init_kaiming_normal_(cn_tensor *t, double a, cn_fan_mode mode, cn_generator *gen) {
    const char *op = "init_kaiming_normal_";
    int64_t fan = 0;
    if (check_target(op, t, gen, 1) != CN_OK || fan_of(op, t, mode, &fan) != CN_OK)
        return cn_last_status();
    double gain = sqrt(2.0 / (1.0 + a * a));
    return cn_init_normal_(t, 0.0, gain / sqrt((double)fan), gen);
}

static cn_status xavier_std(const char *op, cn_tensor *t, double gain, double *std) {
    int64_t in = 0, out = 0;
    if (cn_init_fans(t, &in, &out) != CN_OK) return cn_last_status();
    if (in + out < 1)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "the fans of 't' are 0 (an empty tensor); there is "
                            "nothing to initialise");
    *std = gain * sqrt(2.0 / (double)(in + out));
    return CN_OK;
}

cn_status cn_init_xavier_uniform_(cn_tensor *t, double gain, cn_generator *gen) {
    const char *op = "init_xavier_uniform_";
    double std = 0;
    if (check_target(op, t, gen, 1) != CN_OK || xavier_std(op, t, gain, &std) != CN_OK)
        return cn_last_status();
    double bound = sqrt(3.0) * std;
    return cn_init_uniform_(t, -bound, bound, gen);
}

cn_status cn_init_xavier_normal_(cn_tensor *t, double gain, cn_generator *gen) {
    const char *op = "init_xavier_normal_";
    double std = 0;
    if (check_target(op, t, gen, 1) != CN_OK || xavier_std(op, t, gain, &std) != CN_OK)
        return cn_last_status();
    return cn_init_normal_(t, 0.0, std, gen);
}

/* ---- parameters for constructors ------------------------------------------------------------- */

/* Marks a fresh tensor as a leaf on an autodiff device and takes it out of every scope. */
static cn_tensor *as_param(cn_tensor *t, int tracked) {
    if (!t) return NULL;
    nn_unscoped(t);
    if (tracked && cn_device_of(t).autodiff && !cn_require_grad(t)) {
        cn_release(t);
        return NULL;
    }
    return t;
}

cn_tensor *nn_uniform_param(const int64_t *shape, int ndim, double bound, cn_device device,
                            cn_dtype dtype, cn_generator *gen) {
    cn_tensor *t = nn_unscoped(cn_empty(shape, ndim, dtype, device));
    if (t && cn_init_uniform_(t, -bound, bound, gen) != CN_OK) {
        cn_release(t);
        return NULL;
    }
    return as_param(t, 1);
}

cn_tensor *nn_full_param(const int64_t *shape, int ndim, double value, int tracked,
                         cn_device device, cn_dtype dtype) {
    return as_param(cn_full(shape, ndim, value, dtype, device), tracked);
}
