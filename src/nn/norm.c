/* Normalisation layers: BatchNorm1d/2d (per channel, batch statistics in training, running
 * statistics in evaluation), and LayerNorm and RMSNorm (per sample, over the trailing dims: the
 * fused cn_layer_norm and cn_rms_norm). */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "nn/nn_internal.h"

static void free_state(void *state) { cn__free(state); }

/* ---- BatchNorm ------------------------------------------------------------------------------- */

typedef struct batchnorm_state {
    int dims2d; /* 1: BatchNorm2d (x: [N, C, H, W]); 0: BatchNorm1d ([N, C] or [N, C, L]) */
    int64_t channels;
    double eps, momentum;
    cn_tensor *weight, *bias;              /* [C], or NULL without affine (borrowed) */
    cn_tensor *running_mean, *running_var; /* [C] buffers (borrowed) */
    cn_tensor *num_batches_tracked;        /* i64, 0-d */
} batchnorm_state;

/* t: [C] -> [1, C, 1, ...] with ndim dims, to broadcast against x. */
static cn_tensor *per_channel(cn_tensor *t, int ndim) {
    int64_t shape[CN_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        shape[d] = 1;
    shape[1] = -1;
    return cn_reshape(t, shape, ndim);
}

/* x: [N, C, ...] -> the mean over every dim but 1, kept: [1, C, 1, ...]. Means of means are the
 * mean, since every group has the same count. */
static cn_tensor *channel_mean(cn_tensor *x) {
    cn_tensor *m = x;
    for (int d = cn_ndim(x) - 1; d >= 0 && m; d--)
        if (d != 1) m = cn_mean_dim(m, d, 1);
    return m;
}

static cn_status check_batchnorm_input(const batchnorm_state *s, cn_tensor *x) {
    int nd = cn_ndim(x);
    int ok = s->dims2d ? nd == 4 : nd == 2 || nd == 3;
    if (ok && cn_shape(x)[1] == s->channels) return CN_OK;
    char buf[128];
    return cn_set_error(CN_ERR_SHAPE, s->dims2d ? "batchnorm2d" : "batchnorm1d",
                        "'x' is %s; it must be %s with %lld channels in dim 1",
                        cn_tensor_str(x, buf, sizeof buf),
                        s->dims2d ? "[N, C, H, W]" : "[N, C] or [N, C, L]", (long long)s->channels);
}

/* The running statistics' update, under no-grad mode. mean, var: [1, C, 1, ...] (var biased over
 * n values per channel). */
static cn_status update_running(batchnorm_state *s, cn_tensor *mean, cn_tensor *var, int64_t n) {
    const double mom = s->momentum;
    cn_no_grad_begin();
    cn_tensor *rm = cn_add(cn_mul_scalar(s->running_mean, 1.0 - mom),
                           cn_mul_scalar(cn_reshape(mean, &s->channels, 1), mom));
    cn_tensor *rv =
        cn_add(cn_mul_scalar(s->running_var, 1.0 - mom),
               cn_mul_scalar(cn_reshape(var, &s->channels, 1), mom * (double)n / (double)(n - 1)));
    cn_tensor *count = cn_add_scalar(s->num_batches_tracked, 1);
    cn_status st = rm && rv && count ? CN_OK : cn_last_status();
    if (st == CN_OK) st = cn_copy_(s->running_mean, rm);
    if (st == CN_OK) st = cn_copy_(s->running_var, rv);
    if (st == CN_OK) st = cn_copy_(s->num_batches_tracked, count);
    cn_no_grad_end();
    return st;
}

/* x: [N, C, ...] -> same shape */
static cn_tensor *batchnorm_forward(cn_module *m, cn_tensor *x) {
    batchnorm_state *s = cn_module_state(m);
    if (check_batchnorm_input(s, x) != CN_OK) return NULL;
    int nd = cn_ndim(x);
    cn_tensor *mean, *var;
    int64_t n = cn_numel(x) / s->channels;
    if (cn_module_is_training(m)) {
        if (n < 2) {
            cn_set_error(CN_ERR_SHAPE, "batchnorm",
                         "there is %lld value per channel in a "
                         "training batch, so its variance is undefined; use batches of at least "
                         "2 values per channel, or evaluation mode",
                         (long long)n);
            return NULL;
        }
        mean = channel_mean(x);
        cn_tensor *centred = cn_sub(x, mean);
        var = channel_mean(cn_mul(centred, centred)); /* biased */
    } else {
        mean = per_channel(s->running_mean, nd);
        var = per_channel(s->running_var, nd);
    }
    cn_tensor *y = cn_mul(cn_sub(x, mean), cn_rsqrt(cn_add_scalar(var, s->eps)));
    if (s->weight) y = cn_add(cn_mul(y, per_channel(s->weight, nd)), per_channel(s->bias, nd));
    if (y && cn_module_is_training(m) && update_running(s, mean, var, n) != CN_OK) return NULL;
    return y;
}

static const cn_module_vtable batchnorm1d_vtable = {"BatchNorm1d", batchnorm_forward, NULL,
                                                    free_state};
static const cn_module_vtable batchnorm2d_vtable = {"BatchNorm2d", batchnorm_forward, NULL,
                                                    free_state};

static cn_module *batchnorm_new(const char *op, int dims2d, int64_t num_features, double eps,
                                double momentum, int affine, cn_device device, cn_dtype dtype) {
    if (nn_check_positive(op, "num_features", num_features) != CN_OK ||
        nn_check_float_dtype(op, dtype) != CN_OK)
        return NULL;
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1)) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "eps = %g, momentum = %g; eps must be > 0 and "
                     "momentum in [0, 1] (PyTorch's defaults: 1e-5 and 0.1)",
                     eps, momentum);
        return NULL;
    }
    batchnorm_state *s = cn__calloc(op, 1, sizeof *s);
    if (!s) return NULL;
    s->dims2d = dims2d;
    s->channels = num_features;
    s->eps = eps;
    s->momentum = momentum;
    cn_module *m = cn_module_new(dims2d ? &batchnorm2d_vtable : &batchnorm1d_vtable, s);
    /* each failure frees m, and s with it: stop at the first */
    if (m && affine) {
        s->weight = nn_full_param(&num_features, 1, 1.0, 1, device, dtype);
        if (!(m = nn_with_param(m, "weight", s->weight))) return NULL;
        s->bias = nn_full_param(&num_features, 1, 0.0, 1, device, dtype);
        if (!(m = nn_with_param(m, "bias", s->bias))) return NULL;
    }
    if (!m) return NULL;
    s->running_mean = nn_full_param(&num_features, 1, 0.0, 0, device, dtype);
    if (!(m = nn_with_buffer(m, "running_mean", s->running_mean))) return NULL;
    s->running_var = nn_full_param(&num_features, 1, 1.0, 0, device, dtype);
    if (!(m = nn_with_buffer(m, "running_var", s->running_var))) return NULL;
    s->num_batches_tracked = nn_full_param(NULL, 0, 0.0, 0, device, CN_I64);
    return nn_with_buffer(m, "num_batches_tracked", s->num_batches_tracked);
}

cn_module *cn_batchnorm2d_new(int64_t num_features, double eps, double momentum, int affine,
                              cn_device device, cn_dtype dtype) {
    return batchnorm_new("batchnorm2d_new", 1, num_features, eps, momentum, affine, device, dtype);
}

cn_module *cn_batchnorm1d_new(int64_t num_features, double eps, double momentum, int affine,
                              cn_device device, cn_dtype dtype) {
    return batchnorm_new("batchnorm1d_new", 0, num_features, eps, momentum, affine, device, dtype);
}

/* ---- LayerNorm and RMSNorm ------------------------------------------------------------------ */

typedef struct norm_state {
    int rms;                    /* 1: RMSNorm (no bias, no centring) */
    int ndim;                   /* how many trailing dims are normalised */
    int64_t shape[CN_MAX_DIMS]; /* normalized_shape */
    double eps;
    cn_tensor *weight, *bias; /* normalized_shape, or NULL (borrowed) */
} norm_state;

/* x: [..., normalized_shape] -> same shape, through the fused ops */
static cn_tensor *norm_forward(cn_module *m, cn_tensor *x) {
    norm_state *s = cn_module_state(m);
    if (s->rms) return cn_rms_norm(x, s->shape, s->ndim, s->weight, s->eps);
    return cn_layer_norm(x, s->shape, s->ndim, s->weight, s->bias, s->eps);
}

static const cn_module_vtable layernorm_vtable = {"LayerNorm", norm_forward, NULL, free_state};
static const cn_module_vtable rmsnorm_vtable = {"RMSNorm", norm_forward, NULL, free_state};

static cn_module *norm_new(const char *op, int rms, const int64_t *normalized_shape, int ndim,
                           double eps, int elementwise_affine, cn_device device, cn_dtype dtype) {
    if (!normalized_shape) {
        cn__null_arg(op, "normalized_shape");
        return NULL;
    }
    if (ndim < 1 || ndim > CN_MAX_DIMS) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "ndim = %d; normalise over 1 to %d trailing dims",
                     ndim, CN_MAX_DIMS);
        return NULL;
    }
    for (int d = 0; d < ndim; d++)
        if (nn_check_positive(op, "a size in normalized_shape", normalized_shape[d]) != CN_OK)
            return NULL;
    if (nn_check_float_dtype(op, dtype) != CN_OK) return NULL;
    if (rms ? !(eps >= 0 || eps == CN_RMS_NORM_EPS_DEFAULT) || !isfinite(eps) : !(eps > 0) ||
                                                                                !isfinite(eps)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "eps = %g; it must be %s (PyTorch's default: %s)",
                     eps, rms ? "finite and >= 0, or CN_RMS_NORM_EPS_DEFAULT" : "finite and > 0",
                     rms ? "CN_RMS_NORM_EPS_DEFAULT, the dtype's epsilon" : "1e-5");
        return NULL;
    }
    norm_state *s = cn__calloc(op, 1, sizeof *s);
    if (!s) return NULL;
    s->rms = rms;
    s->ndim = ndim;
    memcpy(s->shape, normalized_shape, sizeof(int64_t) * (size_t)ndim);
    s->eps = eps;
    cn_module *m = cn_module_new(rms ? &rmsnorm_vtable : &layernorm_vtable, s);
    if (m && elementwise_affine) {
        s->weight = nn_full_param(normalized_shape, ndim, 1.0, 1, device, dtype);
        if (!(m = nn_with_param(m, "weight", s->weight))) return NULL; /* s freed with m */
        if (!rms) {
            s->bias = nn_full_param(normalized_shape, ndim, 0.0, 1, device, dtype);
            m = nn_with_param(m, "bias", s->bias);
        }
    }
    return m;
}

cn_module *cn_layernorm_new(const int64_t *normalized_shape, int ndim, double eps,
                            int elementwise_affine, cn_device device, cn_dtype dtype) {
    return norm_new("layernorm_new", 0, normalized_shape, ndim, eps, elementwise_affine, device,
                    dtype);
}

cn_module *cn_rmsnorm_new(const int64_t *normalized_shape, int ndim, double eps,
                          int elementwise_affine, cn_device device, cn_dtype dtype) {
    return norm_new("rmsnorm_new", 1, normalized_shape, ndim, eps, elementwise_affine, device,
                    dtype);
}
