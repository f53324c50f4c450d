/* Tensor creation: from host data, constants, ranges, identity, random. */
#include <math.h>
#include <string.h>

#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "dispatch/registry.h"
#include "dispatch/router.h"

/* ---- allocation ----------------------------------------------------------------------------- *
 * The checks before a new tensor's memory is asked for: shape and dtype, then the device in the
 * registry. Core makes the tensor (cn__tensor_alloc_routed) once dispatch has found its backend. */

cn_tensor *cn__tensor_alloc(const char *op, const int64_t *shape, int ndim, cn_dtype dtype,
                            cn_device device) {
    char buf[160];
    if (ndim < 0 || ndim > CN_MAX_DIMS) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "ndim = %d; tensors have 0 to %d dims", ndim,
                     CN_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !shape) {
        cn__null_arg(op, "shape");
        return NULL;
    }
    if ((unsigned)dtype >= CN_DTYPE_COUNT) {
        cn_set_error(CN_ERR_DTYPE, op, "dtype value %d is not a cn_dtype; use CN_F32, CN_I64, ...",
                     (int)dtype);
        return NULL;
    }
    if (cn__is_quant(dtype)) {
        cn_set_error(CN_ERR_DTYPE, op, "dtype %s is quantized: its tensors hold packed values "
                     "and scales; make one with cn_quantize(x, %s) from a float tensor",
                     cn_dtype_name(dtype), cn_dtype_name(dtype));
        return NULL;
    }
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "shape %s has a negative size at dim %d; sizes "
                         "must be >= 0", cn__shape_str(shape, ndim, buf, sizeof buf), d);
            return NULL;
        }
    }
    cn_device concrete = device;
    concrete.autodiff = 0;
    concrete.checkpoint = 0;
    const cn_backend *b = cn__backend_for_device(op, concrete);
    if (!b) return NULL;
    return cn__tensor_alloc_routed(op, b, shape, ndim, dtype, device);
}

/* ---- creation ops --------------------------------------------------------------------------- */

/* Allocates on device and runs one creation kernel (fill / random) over the whole tensor. */
static cn_tensor *create_with(const char *op, const int64_t *shape, int ndim, cn_dtype dtype,
                              cn_device device, cn_op kernel, const int64_t *ints, int n_ints,
                              const double *reals, int n_reals) {
    cn_tensor *t = cn__tensor_alloc(op, shape, ndim, dtype, device);
    if (!t) return NULL;
    const cn_backend *b = cn__backend(t->device.backend);
    if (cn__launch(b, t->device, kernel, NULL, 0, &t, 1, ints, n_ints, reals, n_reals) != CN_OK) {
        cn_release(t);
        return NULL;
    }
    return t;
}

cn_tensor *cn_from_data(const void *data, const int64_t *shape, int ndim, cn_dtype dtype,
                        cn_device device) {
    if (!data) {
        cn__null_arg("from_data", "data");
        return NULL;
    }
    cn_tensor *t = cn__tensor_alloc("from_data", shape, ndim, dtype, device);
    if (!t) return NULL;
    const cn_backend *b = cn__backend(t->device.backend);
    if (b->copy_from_host(b->ctx, t->device.index, t->storage->data, data, t->storage->nbytes) !=
        CN_OK) {
        cn_release(t);
        return NULL;
    }
    return t;
}

cn_tensor *cn_empty(const int64_t *shape, int ndim, cn_dtype dtype, cn_device device) {
    return cn__tensor_alloc("empty", shape, ndim, dtype, device);
}

cn_tensor *cn_full(const int64_t *shape, int ndim, double value, cn_dtype dtype,
                   cn_device device) {
    if (cn__check_int_scalar("full", "value", value, dtype) != CN_OK) return NULL;
    return create_with("full", shape, ndim, dtype, device, CN_OP_FILL, NULL, 0, &value, 1);
}

cn_tensor *cn_zeros(const int64_t *shape, int ndim, cn_dtype dtype, cn_device device) {
    double zero = 0.0;
    return create_with("zeros", shape, ndim, dtype, device, CN_OP_FILL, NULL, 0, &zero, 1);
}

cn_tensor *cn_ones(const int64_t *shape, int ndim, cn_dtype dtype, cn_device device) {
    double one = 1.0;
    return create_with("ones", shape, ndim, dtype, device, CN_OP_FILL, NULL, 0, &one, 1);
}

cn_tensor *cn_arange(double start, double end, double step, cn_dtype dtype, cn_device device) {
    const char *op = "arange";
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "start = %g, end = %g, step = %g: the bounds must be "
                     "finite and the step non-zero", start, end, step);
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count < 0) count = 0;
    if (count > 9.0e15) {
        cn_set_error(CN_ERR_OVERFLOW, op, "[%g, %g) in steps of %g has too many elements; use a "
                     "larger step", start, end, step);
        return NULL;
    }
    int64_t n = (int64_t)count;
    /* an integer dtype must hold the first and the last value (the values run between them) */
    if (n > 0 && (cn__check_int_scalar(op, "start", start, dtype) != CN_OK ||
                  cn__check_int_scalar(op, "the last value", start + (double)(n - 1) * step,
                                       dtype) != CN_OK))
        return NULL;
    /* the values are computed on the host in f64, then converted by the cast kernel */
    double *host = cn__malloc(op, sizeof(double) * (size_t)(n ? n : 1));
    if (!host) return NULL;
    for (int64_t i = 0; i < n; i++) host[i] = start + (double)i * step;
    cn_tensor *f64 = cn_from_data(host, &n, 1, CN_F64, device);
    cn__free(host);
    if (!f64 || dtype == CN_F64) return f64;
    cn_tensor *t = cn_cast(f64, dtype);
    cn_release(f64);
    return t;
}

cn_tensor *cn_eye(int64_t n, int64_t m, cn_dtype dtype, cn_device device) {
    int64_t shape[2] = {n, m};
    cn_tensor *t = cn_zeros(shape, 2, dtype, device);
    if (!t) return NULL;
    /* ones along the diagonal: a strided view with stride m + 1 */
    int64_t diag = n < m ? n : m;
    if (diag == 0) return t; /* no diagonal; m + 1 below could overflow then */
    cn_view v;
    cn__tensor_as_view(t, &v);
    v.ndim = 1;
    v.shape[0] = diag;
    v.strides[0] = m + 1;
    double one = 1.0;
    const cn_backend *b = cn__backend(t->device.backend);
    if (cn__launch_views(b, t->device, CN_OP_FILL, NULL, 0, &v, 1, NULL, 0, &one, 1) != CN_OK) {
        cn_release(t);
        return NULL;
    }
    return t;
}

cn_generator cn_generator_new(uint64_t seed) {
    cn_generator g = {seed, 0};
    return g;
}

static cn_tensor *random_tensor(const char *op, cn_op kernel, cn_generator *gen,
                                const int64_t *shape, int ndim, double p0, double p1,
                                cn_dtype dtype, cn_device device) {
    if (!gen) {
        cn__null_arg(op, "gen");
        return NULL;
    }
    if (cn_dtype_kind(dtype) != CN_KIND_FLOAT) {
        cn_set_error(CN_ERR_DTYPE, op, "dtype %s is not a float dtype; draw floats (CN_F32) and "
                     "convert with cn_cast if needed", cn_dtype_name(dtype));
        return NULL;
    }
    if (!isfinite(p0) || !isfinite(p1) || (kernel == CN_OP_RAND_UNIFORM && !(p0 < p1)) ||
        (kernel == CN_OP_RAND_NORMAL && !(p1 >= 0))) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "parameters (%g, %g) are invalid; uniform needs "
                     "finite low < high, normal a finite mean and std >= 0", p0, p1);
        return NULL;
    }
    int64_t ints[2] = {(int64_t)gen->seed, (int64_t)gen->offset};
    double reals[2] = {p0, p1};
    cn_tensor *t = create_with(op, shape, ndim, dtype, device, kernel, ints, 2, reals, 2);
    if (t) gen->offset += (uint64_t)t->numel;
    return t;
}

cn_tensor *cn_rand_uniform(cn_generator *gen, const int64_t *shape, int ndim, double low,
                           double high, cn_dtype dtype, cn_device device) {
    return random_tensor("rand_uniform", CN_OP_RAND_UNIFORM, gen, shape, ndim, low, high, dtype,
                         device);
}

cn_tensor *cn_rand_normal(cn_generator *gen, const int64_t *shape, int ndim, double mean,
                          double std, cn_dtype dtype, cn_device device) {
    return random_tensor("rand_normal", CN_OP_RAND_NORMAL, gen, shape, ndim, mean, std, dtype,
                         device);
}
