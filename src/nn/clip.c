/* Gradient clipping by the global L2 norm (torch.nn.utils.clip_grad_norm_). */
#include <math.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* sum(g^2) of one gradient, accumulated in f64 on the host. */
static cn_status squared_norm(cn_tensor *g, double *out) {
    cn_tensor *sq = cn_sum(cn_cast(cn_mul(g, g), CN_F64));
    if (!sq) return cn_last_status();
    return cn_read(sq, out, sizeof *out);
}

double cn_clip_grad_norm(cn_grads *grads, const cn_param *params, int n, double max_norm) {
    const char *op = "clip_grad_norm";
    if (!grads || (!params && n > 0)) {
        cn__null_arg(op, !grads ? "grads" : "params");
        return -1.0;
    }
    if (n < 0 || !(max_norm >= 0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d, max_norm = %g; both must be >= 0", n,
                     max_norm);
        return -1.0;
    }
    cn_tensor **found = cn__calloc(op, (size_t)(n ? n : 1), sizeof *found);
    if (!found) return -1.0;
    if (cn_scope_begin() != CN_OK) {
        cn__free(found);
        return -1.0;
    }
    cn_no_grad_begin();
    cn_status s = CN_OK;
    double total_sq = 0;
    for (int i = 0; i < n && s == CN_OK; i++) {
        found[i] = nn_grad_or_null(grads, params[i].tensor);
        double sq = 0;
        if (found[i]) s = squared_norm(found[i], &sq);
        total_sq += sq;
    }
    double total = sqrt(total_sq);
    double coef = max_norm / (total + 1e-6);
    if (s == CN_OK && coef < 1.0) {
        /* every scaled gradient is computed before any is written: gradients in a cn_grads may
         * share memory (broadcast views of one value), and each must be scaled exactly once */
        cn_tensor **scaled = cn__calloc(op, (size_t)(n ? n : 1), sizeof *scaled);
        if (!scaled) s = CN_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < n && s == CN_OK; i++)
            if (found[i] && !(scaled[i] = cn_mul_scalar(found[i], coef))) s = cn_last_status();
        for (int i = 0; i < n && s == CN_OK; i++)
            if (scaled[i]) s = cn_copy_(found[i], scaled[i]);
        cn__free(scaled);
    }
    cn_no_grad_end();
    cn_scope_end();
    cn__free(found);
    return s == CN_OK ? total : -1.0;
}
