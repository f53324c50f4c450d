/* The scale op of consumer.cnext: its shape function, CPU kernel and backward, as a user outside
 * cinder's tree writes them against the installed headers. Shared by both consumer projects. */
#include "cinder/cinder.h"
#include "consumer.h"

cn_status consumer_scale_shape(const cn_view *in, int n_in, const int64_t *ints,
                               const double *reals, cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    const cn_view *x = &in[CONSUMER_SCALE_IN_X];
    if (x->dtype != CN_F32)
        return cn_set_error(CN_ERR_DTYPE, "consumer_scale", "x is %s; the kernel takes f32",
                            cn_dtype_name(x->dtype));
    out[CONSUMER_SCALE_OUT_Y].dtype = CN_F32;
    out[CONSUMER_SCALE_OUT_Y].ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) out[CONSUMER_SCALE_OUT_Y].shape[d] = x->shape[d];
    return CN_OK;
}

/* Walks every element of x (any strides) in row-major order; y is contiguous. */
cn_status consumer_scale_cpu(const cn_kernel_args *args) {
    const cn_view *x = &args->in[CONSUMER_SCALE_IN_X], *y = &args->out[CONSUMER_SCALE_OUT_Y];
    double a = args->reals[CONSUMER_SCALE_REAL_A];
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, off = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            off += (rest % x->shape[d]) * x->strides[d];
            rest /= x->shape[d];
        }
        ((float *)y->data)[i] = (float)(a * ((const float *)x->data)[off]);
    }
    return CN_OK;
}

cn_status consumer_scale_backward(cn_tensor *const *in, const int *needs_grad, int n_in,
                                  cn_tensor *const *out, cn_tensor *const *grad_out, int n_out,
                                  const int64_t *ints, const double *reals, cn_tensor **grad_in) {
    (void)in, (void)n_in, (void)out, (void)n_out, (void)ints;
    if (!needs_grad[CONSUMER_SCALE_IN_X]) return CN_OK;
    cn_tensor *g = cn_mul_scalar(grad_out[CONSUMER_SCALE_OUT_Y], reals[CONSUMER_SCALE_REAL_A]);
    if (!g) return cn_last_status();
    grad_in[CONSUMER_SCALE_IN_X] = g;
    return CN_OK;
}
