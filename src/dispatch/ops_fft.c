/* Front-ends of the real FFT (issue 16): rfft and irfft along one dim, torch.fft's semantics with
 * complex values stored as a trailing dim of 2 (torch.view_as_real's layout). Each checks its
 * arguments (kind, rank, dim, n, norm), computes the output's shape and the norm's scale, and runs
 * its kernel through the router. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/router.h"

/* The transform's scale: rfft's (inverse = 0) or irfft's (inverse = 1) factor for norm. */
static double fft_scale(int inverse, cn_fft_norm norm, int64_t n) {
    if (norm == CN_FFT_ORTHO) return 1.0 / sqrt((double)n);
    return (norm == CN_FFT_FORWARD) != inverse ? 1.0 / (double)n : 1.0;
}

/* Checks norm, and n (the user's, -1: `fallback`, the default length) and writes the length. */
static cn_status check_n_norm(const char *op, int64_t n, int64_t fallback, const char *why,
                              cn_fft_norm norm, int64_t *len) {
    if (norm != CN_FFT_BACKWARD && norm != CN_FFT_FORWARD && norm != CN_FFT_ORTHO)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'norm' %d is not a cn_fft_norm; use "
                            "CN_FFT_BACKWARD, CN_FFT_FORWARD or CN_FFT_ORTHO",
                            (int)norm);
    if (n == 0 || n < -1)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'n' is %lld; the signal length must be >= 1, "
                            "or -1 for the default (%s)",
                            (long long)n, why);
    if (n == -1 && fallback < 1)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'n' is -1, and the default (%s) is %lld "
                            "here; pass a length n >= 1",
                            why, (long long)fallback);
    int64_t v = n == -1 ? fallback : n;
    if (v > INT_MAX)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "'n' %lld is past 2^31 - 1, the most a "
                            "transform takes (kissfft and cuFFT plans); split the signal",
                            (long long)v);
    *len = v;
    return CN_OK;
}

/* Runs op on the single input t (a view of it in v), writing out; records it. */
static cn_tensor *run(const char *name, cn_op op, const cn_backend *b, cn_device dev, cn_tensor *t,
                      const int64_t *shape, int ndim, const int64_t *ints, double scale) {
    cn_tensor *out = cn__tensor_alloc(name, shape, ndim, t->dtype, dev);
    if (!out) return NULL;
    cn_view v;
    cn__tensor_as_view(t, &v);
    if (cn__launch(b, dev, op, &v, 1, &out, 1, ints, 3, &scale, 1) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(op, out, &t, 1, ints, 3, &scale, 1);
}

cn_tensor *cn_rfft(cn_tensor *x, int64_t n, int dim, cn_fft_norm norm) {
    const char *op = "rfft";
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    cn_device dev;
    const cn_backend *b = cn__route(op, &x, (const char *const[]){"x"}, 1, &dev);
    if (!b || cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK) return NULL;
    char a[128];
    if (x->ndim < 1 || x->ndim >= CN_MAX_DIMS) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "'x' %s must have 1 to %d dims (the result adds a dim of "
                     "2 for the real and imaginary parts); %s",
                     cn_tensor_str(x, a, sizeof a), CN_MAX_DIMS - 1,
                     x->ndim < 1 ? "unsqueeze a scalar with cn_unsqueeze"
                                 : "merge dims with cn_reshape first");
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, x->ndim);
    int64_t len;
    if (d < 0 || check_n_norm(op, n, x->shape[d], "x's size along dim", norm, &len) != CN_OK)
        return NULL;
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[d] = len / 2 + 1;
    shape[x->ndim] = 2;
    int64_t ints[3] = {d, len, (int64_t)norm};
    return run(op, CN_OP_RFFT, b, dev, x, shape, x->ndim + 1, ints, fft_scale(0, norm, len));
}

cn_tensor *cn_irfft(cn_tensor *spectrum, int64_t n, int dim, cn_fft_norm norm) {
    const char *op = "irfft";
    if (!spectrum) {
        cn__null_arg(op, "spectrum");
        return NULL;
    }
    cn_tensor *z = spectrum;
    cn_device dev;
    const cn_backend *b = cn__route(op, &z, (const char *const[]){"spectrum"}, 1, &dev);
    if (!b || cn__check_kind(op, "spectrum", z, CN_KINDS_FLOAT) != CN_OK) return NULL;
    char a[128];
    if (z->ndim < 2 || z->shape[z->ndim - 1] != 2) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "'spectrum' %s must end in a dim of 2 (real and "
                     "imaginary parts, as cn_rfft returns them) after at least one other; from "
                     "separate parts, make it with cn_stack((cn_tensor *[]){re, im}, 2, -1)",
                     cn_tensor_str(z, a, sizeof a));
        return NULL;
    }
    int nd = z->ndim - 1; /* the complex tensor's dims */
    int d = cn__norm_dim(op, "dim", dim, nd);
    int64_t len, bins = d < 0 ? 0 : z->shape[d];
    /* the default 2 (F - 1), kept from overflowing for an empty tensor's huge sizes */
    int64_t fallback = bins > INT_MAX ? (int64_t)INT_MAX + 1 : 2 * (bins - 1);
    if (d < 0 || check_n_norm(op, n, fallback, "2 * (the spectrum's size along dim - 1)", norm,
                              &len) != CN_OK)
        return NULL;
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, z->shape, sizeof(int64_t) * (size_t)nd);
    shape[d] = len;
    int64_t ints[3] = {d, len, (int64_t)norm};
    return run(op, CN_OP_IRFFT, b, dev, z, shape, nd, ints, fft_scale(1, norm, len));
}
