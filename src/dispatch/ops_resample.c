/* Resampling front-ends of issue 16: interpolate (torch.nn.functional.interpolate's nearest,
 * linear / bilinear and bicubic modes on [N, C, L] and [N, C, H, W]) and its backward kernel's
 * entry. Each checks its arguments (rank, sizes or scale factors, mode, align_corners), computes
 * the output's shape by PyTorch's rules, and runs its kernel through the router. */
#include <math.h>
#include <string.h>

#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* The mode and align_corners are valid for n spatial dims (PyTorch's refusals: bicubic needs
 * 4-D input, nearest takes no align_corners). */
static cn_status check_mode(const char *op, int mode, int align, int n) {
    if (mode < CN_INTERP_NEAREST || mode > CN_INTERP_BICUBIC)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'mode' %d is not a cn_interp_mode; use "
                            "CN_INTERP_NEAREST, CN_INTERP_LINEAR or CN_INTERP_BICUBIC", mode);
    if (mode == CN_INTERP_BICUBIC && n != 2)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'mode' bicubic needs a 2-D resampling "
                            "([N, C, H, W], n = 2); use CN_INTERP_LINEAR for [N, C, L]");
    if (align != 0 && align != 1)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'align_corners' is %d; pass 0 or 1", align);
    if (align && mode == CN_INTERP_NEAREST)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'align_corners' applies to the linear and "
                            "bicubic modes only, not nearest (as in PyTorch); pass 0");
    return CN_OK;
}

/* x is [N, C, spatial...] with n = 1 or 2 spatial dims, each of size >= 1. */
static cn_status check_input(const char *op, const cn_tensor *x, int n) {
    if (n != 1 && n != 2)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'n' is %d spatial dims; interpolate "
                            "resamples 1 ([N, C, L]) or 2 ([N, C, H, W])", n);
    char a[128];
    if (x->ndim != n + 2)
        return cn_set_error(CN_ERR_SHAPE, op, "'x' %s must have %d dims for n = %d ([N, C, %s]); "
                            "add a batch or channel dim with cn_unsqueeze",
                            cn_tensor_str(x, a, sizeof a), n + 2, n, n == 1 ? "L" : "H, W");
    for (int d = 2; d < x->ndim; d++)
        if (x->shape[d] < 1)
            return cn_set_error(CN_ERR_SHAPE, op, "'x' %s has an empty spatial dim %d; there is "
                                "nothing to resample from", cn_tensor_str(x, a, sizeof a), d);
    return CN_OK;
}

cn_tensor *cn_interpolate(cn_tensor *x, int n, const int64_t *size, const double *scale,
                          cn_interp_mode mode, int align_corners) {
    const char *op = "interpolate";
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    cn_device dev;
    const cn_backend *b = cn__route(op, &x, (const char *const[]){"x"}, 1, &dev);
    if (!b || cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK ||
        check_input(op, x, n) != CN_OK || check_mode(op, (int)mode, align_corners, n) != CN_OK)
        return NULL;
    if (!size == !scale) {
        cn_set_error(size ? CN_ERR_INVALID_ARG : CN_ERR_NULL_ARG, op,
                     "'size' and 'scale' are both %s; pass exactly one (the other NULL)",
                     size ? "given" : "NULL");
        return NULL;
    }
    int64_t shape[4];
    double reals[2] = {0, 0};
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    for (int i = 0; i < n; i++) {
        int64_t in = x->shape[2 + i], out;
        if (size) {
            out = size[i];
            if (out < 1) {
                cn_set_error(CN_ERR_INVALID_ARG, op, "'size[%d]' is %lld; output sizes must be "
                             ">= 1", i, (long long)out);
                return NULL;
            }
        } else {
            double s = scale[i];
            if (!(s > 0) || !isfinite(s)) {
                cn_set_error(CN_ERR_INVALID_ARG, op, "'scale[%d]' is %g; scale factors must be "
                             "positive and finite", i, s);
                return NULL;
            }
            double o = floor((double)in * s); /* PyTorch: floor(float(in * scale)) */
            if (o >= 0x1p62) {
                cn_set_error(CN_ERR_OVERFLOW, op, "'scale[%d]' %g makes an output size of %g "
                             "along dim %d, beyond int64; check it for a mistake", i, s, o,
                             2 + i);
                return NULL;
            }
            out = (int64_t)o;
            if (out < 1) {
                cn_set_error(CN_ERR_INVALID_ARG, op, "'scale[%d]' %g makes an empty output "
                             "(floor(%lld * %g) = 0) along dim %d; use a larger scale or "
                             "'size'", i, s, (long long)in, s, 2 + i);
                return NULL;
            }
            reals[i] = s;
        }
        shape[2 + i] = out;
    }
    cn_tensor *out = cn__tensor_alloc(op, shape, x->ndim, x->dtype, dev);
    if (!out) return NULL;
    cn_view v;
    cn__tensor_as_view(x, &v);
    int64_t ints[2] = {(int64_t)mode, align_corners};
    if (cn__launch(b, dev, CN_OP_INTERPOLATE, &v, 1, &out, 1, ints, 2, reals, 2) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(CN_OP_INTERPOLATE, out, &x, 1, ints, 2, reals, 2);
}

cn_tensor *cn__interpolate_backward(cn_tensor *g, const int64_t *x_shape, int x_ndim,
                                    const int64_t *ints, const double *reals) {
    const char *op = "interpolate_backward";
    if (!g) {
        cn__null_arg(op, "g");
        return NULL;
    }
    cn_device dev;
    const cn_backend *b = cn__route(op, &g, (const char *const[]){"g"}, 1, &dev);
    if (!b || cn__check_kind(op, "g", g, CN_KINDS_FLOAT) != CN_OK) return NULL;
    int n = x_ndim - 2;
    if ((n != 1 && n != 2) || g->ndim != x_ndim || g->shape[0] != x_shape[0] ||
        g->shape[1] != x_shape[1]) {
        cn_set_error(CN_ERR_SHAPE, op, "the gradient must be interpolate's output for an input "
                     "of %d dims: [N, C] as the input's and 1 or 2 spatial dims", x_ndim);
        return NULL;
    }
    for (int d = 2; d < x_ndim; d++)
        if (x_shape[d] < 1 || g->shape[d] < 1) {
            cn_set_error(CN_ERR_SHAPE, op, "spatial sizes must be >= 1");
            return NULL;
        }
    if (check_mode(op, (int)ints[0], (int)ints[1], n) != CN_OK) return NULL;
    cn_tensor *out = cn__tensor_alloc(op, x_shape, x_ndim, g->dtype, dev);
    if (!out) return NULL;
    cn_view v;
    cn__tensor_as_view(g, &v);
    if (cn__launch(b, dev, CN_OP_INTERPOLATE_BACKWARD, &v, 1, &out, 1, ints, 2, reals, 2) !=
        CN_OK) {
        cn_release(out);
        return NULL;
    }
    return out;
}
