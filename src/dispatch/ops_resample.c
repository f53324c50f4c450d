/* Resampling front-ends of issue 16: interpolate (torch.nn.functional.interpolate's nearest,
 * linear / bilinear and bicubic modes on [N, C, L] and [N, C, H, W]), grid_sample_2d
 * (torch.nn.functional.grid_sample on [N, C, H, W]) and their backward kernels' entries, and the
 * signal windows (hann, hamming, blackman). Each checks its arguments (rank, sizes or scale
 * factors, mode, align_corners), computes the output's shape by PyTorch's rules, and runs its
 * kernel through the router. */
#include <math.h>
#include <string.h>

#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* The mode and align_corners are valid for n spatial dims (PyTorch's refusals: bicubic needs
 * 4-D input, nearest takes no align_corners). */
static cn_status check_mode(const char *op, int mode, int align, int n) {
    if (mode < CN_INTERP_NEAREST || mode > CN_INTERP_BICUBIC)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'mode' %d is not a cn_interp_mode; use "
                            "CN_INTERP_NEAREST, CN_INTERP_LINEAR or CN_INTERP_BICUBIC",
                            mode);
    if (mode == CN_INTERP_BICUBIC && n != 2)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'mode' bicubic needs a 2-D resampling "
                            "([N, C, H, W], n = 2); use CN_INTERP_LINEAR for [N, C, L]");
    if (align != 0 && align != 1)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'align_corners' is %d; pass 0 or 1", align);
    if (align && mode == CN_INTERP_NEAREST)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'align_corners' applies to the linear and "
                            "bicubic modes only, not nearest (as in PyTorch); pass 0");
    return CN_OK;
}

/* x is [N, C, spatial...] with n = 1 or 2 spatial dims, each of size >= 1. */
static cn_status check_input(const char *op, const cn_tensor *x, int n) {
    if (n != 1 && n != 2)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'n' is %d spatial dims; interpolate "
                            "resamples 1 ([N, C, L]) or 2 ([N, C, H, W])",
                            n);
    char a[128];
    if (x->ndim != n + 2)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "'x' %s must have %d dims for n = %d ([N, C, %s]); "
                            "add a batch or channel dim with cn_unsqueeze",
                            cn_tensor_str(x, a, sizeof a), n + 2, n, n == 1 ? "L" : "H, W");
    for (int d = 2; d < x->ndim; d++)
        if (x->shape[d] < 1)
            return cn_set_error(CN_ERR_SHAPE, op,
                                "'x' %s has an empty spatial dim %d; there is "
                                "nothing to resample from",
                                cn_tensor_str(x, a, sizeof a), d);
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
                cn_set_error(CN_ERR_INVALID_ARG, op,
                             "'size[%d]' is %lld; output sizes must be "
                             ">= 1",
                             i, (long long)out);
                return NULL;
            }
        } else {
            double s = scale[i];
            if (!(s > 0) || !isfinite(s)) {
                cn_set_error(CN_ERR_INVALID_ARG, op,
                             "'scale[%d]' is %g; scale factors must be "
                             "positive and finite",
                             i, s);
                return NULL;
            }
            double o = floor((double)in * s); /* PyTorch: floor(float(in * scale)) */
            if (o >= 0x1p62) {
                cn_set_error(CN_ERR_OVERFLOW, op,
                             "'scale[%d]' %g makes an output size of %g "
                             "along dim %d, beyond int64; check it for a mistake",
                             i, s, o, 2 + i);
                return NULL;
            }
            out = (int64_t)o;
            if (out < 1) {
                cn_set_error(CN_ERR_INVALID_ARG, op,
                             "'scale[%d]' %g makes an empty output "
                             "(floor(%lld * %g) = 0) along dim %d; use a larger scale or "
                             "'size'",
                             i, s, (long long)in, s, 2 + i);
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
        cn_set_error(CN_ERR_SHAPE, op,
                     "the gradient must be interpolate's output for an input "
                     "of %d dims: [N, C] as the input's and 1 or 2 spatial dims",
                     x_ndim);
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

/* ---- grid_sample_2d ---------------------------------------------------------------------- */

/* x [N, C, H, W] (H, W >= 1) and grid [N, OH, OW, 2] of x's dtype; mode, padding and align are
 * known values. */
static cn_status check_grid_sample(const char *op, const cn_tensor *x, const cn_tensor *grid,
                                   int mode, int padding, int align) {
    if (cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK ||
        cn__check_same_dtype(op, "x", x, "grid", grid) != CN_OK)
        return cn_last_status();
    char a[128], b[128];
    if (x->ndim != 4 || x->shape[2] < 1 || x->shape[3] < 1)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "'x' %s must be [N, C, H, W] with H, W >= 1 (add "
                            "a batch dim with cn_unsqueeze(x, 0))",
                            cn_tensor_str(x, a, sizeof a));
    if (grid->ndim != 4 || grid->shape[3] != 2 || grid->shape[0] != x->shape[0])
        return cn_set_error(CN_ERR_SHAPE, op,
                            "'grid' %s must be [N, OH, OW, 2] with x's N "
                            "(x is %s): one (x, y) pair in [-1, 1] per output position",
                            cn_tensor_str(grid, a, sizeof a), cn_tensor_str(x, b, sizeof b));
    if (mode != CN_GRID_BILINEAR && mode != CN_GRID_NEAREST)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'mode' %d is not a cn_grid_mode; use "
                            "CN_GRID_BILINEAR or CN_GRID_NEAREST",
                            mode);
    if (padding < CN_GRID_PAD_ZEROS || padding > CN_GRID_PAD_REFLECTION)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'padding' %d is not a cn_grid_padding; use "
                            "CN_GRID_PAD_ZEROS, CN_GRID_PAD_BORDER or CN_GRID_PAD_REFLECTION",
                            padding);
    if (align != 0 && align != 1)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "'align_corners' is %d; pass 0 or 1", align);
    return CN_OK;
}

cn_tensor *cn_grid_sample_2d(cn_tensor *x, cn_tensor *grid, cn_grid_mode mode,
                             cn_grid_padding padding, int align_corners) {
    const char *op = "grid_sample_2d";
    cn_tensor *in[2] = {x, grid};
    const char *names[2] = {"x", "grid"};
    if (!x || !grid) {
        cn__null_arg(op, !x ? "x" : "grid");
        return NULL;
    }
    cn_device dev;
    const cn_backend *b = cn__route(op, in, names, 2, &dev);
    if (!b || check_grid_sample(op, x, grid, (int)mode, (int)padding, align_corners) != CN_OK)
        return NULL;
    const int64_t shape[4] = {x->shape[0], x->shape[1], grid->shape[1], grid->shape[2]};
    cn_tensor *out = cn__tensor_alloc(op, shape, 4, x->dtype, dev);
    if (!out) return NULL;
    cn_view v[2];
    cn__tensor_as_view(x, &v[0]);
    cn__tensor_as_view(grid, &v[1]);
    int64_t ints[3] = {(int64_t)mode, (int64_t)padding, align_corners};
    if (cn__launch(b, dev, CN_OP_GRID_SAMPLE_2D, v, 2, &out, 1, ints, 3, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(CN_OP_GRID_SAMPLE_2D, out, in, 2, ints, 3, NULL, 0);
}

cn_tensor *cn__grid_sample_2d_backward(cn_tensor *g, cn_tensor *x, cn_tensor *grid,
                                       const int64_t *ints, int which) {
    const char *op = "grid_sample_2d_backward";
    cn_tensor *in[3] = {g, x, grid};
    const char *names[3] = {"g", "x", "grid"};
    if (!g || !x || !grid) {
        cn__null_arg(op, !g ? "g" : !x ? "x" : "grid");
        return NULL;
    }
    cn_device dev;
    const cn_backend *b = cn__route(op, in, names, 3, &dev);
    if (!b || check_grid_sample(op, x, grid, (int)ints[0], (int)ints[1], (int)ints[2]) != CN_OK ||
        cn__check_same_dtype(op, "x", x, "g", g) != CN_OK)
        return NULL;
    const int64_t gshape[4] = {x->shape[0], x->shape[1], grid->shape[1], grid->shape[2]};
    if (g->ndim != 4 || memcmp(g->shape, gshape, sizeof gshape) != 0 ||
        (which != 0 && which != 1)) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "the gradient must be grid_sample_2d's output "
                     "[N, C, OH, OW], and which 0 (x) or 1 (grid)");
        return NULL;
    }
    const cn_tensor *like = which ? grid : x;
    cn_tensor *out = cn__tensor_alloc(op, like->shape, 4, x->dtype, dev);
    if (!out) return NULL;
    cn_view v[3];
    for (int i = 0; i < 3; i++)
        cn__tensor_as_view(in[i], &v[i]);
    int64_t args[4] = {ints[0], ints[1], ints[2], which};
    if (cn__launch(b, dev, CN_OP_GRID_SAMPLE_2D_BACKWARD, v, 3, &out, 1, args, 4, NULL, 0) !=
        CN_OK) {
        cn_release(out);
        return NULL;
    }
    return out;
}

/* ---- windows ------------------------------------------------------------------------------
 * Computed on the host in f64 by PyTorch's formulas, w[k] = sum_j (-1)^j a[j] cos(2 pi j k / d)
 * with d = n (periodic) or n - 1 (symmetric), then placed on the device and converted to dtype
 * (as cn_arange does): the same values on every backend. */

static cn_tensor *cosine_window(const char *op, int64_t n, int periodic, cn_dtype dtype,
                                cn_device device, const double *a, int terms) {
    if (n < 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "'n' is %lld; a window has n >= 0 entries",
                     (long long)n);
        return NULL;
    }
    if (n > ((int64_t)1 << 53)) {
        cn_set_error(CN_ERR_OVERFLOW, op,
                     "'n' %lld is too large a window; check it for a "
                     "mistake",
                     (long long)n);
        return NULL;
    }
    if (cn_dtype_size(dtype) == 0 || cn__dtype_kind(dtype) != CN_KIND_FLOAT) {
        cn_set_error(CN_ERR_DTYPE, op,
                     "'dtype' %d is not a float dtype; windows are f32, f64, "
                     "f16 or bf16",
                     (int)dtype);
        return NULL;
    }
    if (periodic != 0 && periodic != 1) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "'periodic' is %d; pass 0 or 1", periodic);
        return NULL;
    }
    double *host = cn__malloc(op, sizeof(double) * (size_t)(n ? n : 1));
    if (!host) return NULL;
    double d = (double)(periodic ? n : n - 1);
    for (int64_t k = 0; k < n; k++) {
        if (n == 1) { /* PyTorch: a single entry of 1 */
            host[k] = 1;
            break;
        }
        double w = a[0], step = 2 * 3.14159265358979323846 / d;
        for (int j = 1; j < terms; j++)
            w += (j & 1 ? -a[j] : a[j]) * cos((double)k * step * (double)j);
        host[k] = w;
    }
    cn_tensor *f64 = cn_from_data(host, &n, 1, CN_F64, device);
    cn__free(host);
    if (!f64 || dtype == CN_F64) return f64;
    cn_tensor *t = cn_cast(f64, dtype);
    cn_release(f64);
    return t;
}

cn_tensor *cn_hann_window(int64_t n, int periodic, cn_dtype dtype, cn_device device) {
    const double a[2] = {0.5, 0.5};
    return cosine_window("hann_window", n, periodic, dtype, device, a, 2);
}

cn_tensor *cn_hamming_window(int64_t n, int periodic, cn_dtype dtype, cn_device device) {
    const double a[2] = {0.54, 0.46};
    return cosine_window("hamming_window", n, periodic, dtype, device, a, 2);
}

cn_tensor *cn_blackman_window(int64_t n, int periodic, cn_dtype dtype, cn_device device) {
    const double a[3] = {0.42, 0.5, 0.08};
    return cosine_window("blackman_window", n, periodic, dtype, device, a, 3);
}
