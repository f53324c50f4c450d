/* Views: new geometry over the same storage, never a copy. */
#include <string.h>

#include "cinder/autodiff.h"
#include "cinder/tensor.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "dispatch/router.h"

cn_tensor *cn_transpose(cn_tensor *t, int dim0, int dim1) {
    const char *op = "transpose";
    CN__CHECK_LIVE(op, t);
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    int a = cn__norm_dim(op, "dim0", dim0, t->ndim), b;
    if (a < 0 || (b = cn__norm_dim(op, "dim1", dim1, t->ndim)) < 0) return NULL;
    if (t->ndim == 0)
        return cn__record(CN__OP_VIEW, cn__view(op, t, t->shape, t->strides, 0, t->offset), &t, 1,
                          NULL, 0, NULL, 0);
    int64_t shape[CN_MAX_DIMS], strides[CN_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    shape[a] = t->shape[b];
    shape[b] = t->shape[a];
    strides[a] = t->strides[b];
    strides[b] = t->strides[a];
    int64_t ints[2] = {a, b};
    return cn__record(CN__OP_TRANSPOSE, cn__view(op, t, shape, strides, t->ndim, t->offset), &t,
                      1, ints, 2, NULL, 0);
}

cn_tensor *cn_permute(cn_tensor *t, const int *perm) {
    const char *op = "permute";
    CN__CHECK_LIVE(op, t);
    if (!t || !perm) {
        cn__null_arg(op, !t ? "t" : "perm");
        return NULL;
    }
    int seen[CN_MAX_DIMS] = {0};
    int64_t shape[CN_MAX_DIMS], strides[CN_MAX_DIMS], ints[CN_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        int d = cn__norm_dim(op, "perm entry", perm[i], t->ndim);
        if (d < 0) return NULL;
        if (seen[d]++) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "perm names dim %d twice; give each of the %d "
                         "dims exactly once", d, t->ndim);
            return NULL;
        }
        shape[i] = t->shape[d];
        strides[i] = t->strides[d];
        ints[i] = d;
    }
    return cn__record(CN__OP_PERMUTE, cn__view(op, t, shape, strides, t->ndim, t->offset), &t,
                      1, ints, t->ndim, NULL, 0);
}

cn_tensor *cn_slice(cn_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    const char *op = "slice";
    CN__CHECK_LIVE(op, t);
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    if (t->ndim == 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "cannot slice a 0-d tensor; reshape it to [1] first");
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, t->ndim);
    if (d < 0) return NULL;
    if (step <= 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "step = %lld; the step must be positive (reverse "
                     "order is not supported by views)", (long long)step);
        return NULL;
    }
    int64_t n = t->shape[d];
    /* Python semantics: negative bounds count from the end, out-of-range bounds clamp */
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0) start = 0;
    if (start > n) start = n;
    if (end < start) end = start;
    if (end > n) end = n;
    int64_t shape[CN_MAX_DIMS], strides[CN_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    /* end - start <= n, and a step beyond it keeps one element: no sum here can overflow */
    shape[d] = end == start ? 0 : (end - start - 1) / step + 1;
    int64_t offset = t->offset;
    if (shape[d] > 1 && __builtin_mul_overflow(t->strides[d], step, &strides[d])) {
        char a[128];
        cn_set_error(CN_ERR_OVERFLOW, op, "step = %lld over dim %d of %s (stride %lld) makes a "
                     "stride beyond int64; use a smaller step", (long long)step, d,
                     cn_tensor_str(t, a, sizeof a), (long long)t->strides[d]);
        return NULL;
    }
    if (shape[d] > 0 && t->numel > 0) /* an empty tensor's offset is never read */
        offset += start * t->strides[d]; /* within the storage: cannot overflow */
    int64_t ints[3] = {d, start, step};
    return cn__record(CN__OP_SLICE, cn__view(op, t, shape, strides, t->ndim, offset), &t, 1,
                      ints, 3, NULL, 0);
}

cn_tensor *cn_expand(cn_tensor *t, const int64_t *shape, int ndim) {
    const char *op = "expand";
    CN__CHECK_LIVE(op, t);
    if (!t || !shape) {
        cn__null_arg(op, !t ? "t" : "shape");
        return NULL;
    }
    char a[128], b[128];
    if (ndim < t->ndim || ndim > CN_MAX_DIMS) {
        cn_set_error(CN_ERR_SHAPE, op, "cannot expand %s to %d dims; the target needs at least "
                     "as many dims as the tensor (and at most %d)",
                     cn_tensor_str(t, a, sizeof a), ndim, CN_MAX_DIMS);
        return NULL;
    }
    int64_t strides[CN_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        int d = t->ndim - ndim + i;
        if (shape[i] < 0) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "target shape %s has a negative size; sizes "
                         "must be >= 0", cn__shape_str(shape, ndim, b, sizeof b));
            return NULL;
        }
        if (d < 0) {
            strides[i] = 0;
        } else if (t->shape[d] == shape[i]) {
            strides[i] = t->strides[d];
        } else if (t->shape[d] == 1) {
            strides[i] = 0;
        } else {
            cn_set_error(CN_ERR_SHAPE, op, "%s cannot be broadcast to %s: dim %d has size %lld, "
                         "not 1 or %lld; only size-1 dims stretch",
                         cn_tensor_str(t, a, sizeof a), cn__shape_str(shape, ndim, b, sizeof b),
                         d, (long long)t->shape[d], (long long)shape[i]);
            return NULL;
        }
    }
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) numel = 0; /* empty: no product to overflow, whatever the sizes */
    for (int i = 0; i < ndim && numel; i++) {
        if (numel > INT64_MAX / shape[i]) {
            cn_set_error(CN_ERR_OVERFLOW, op, "target shape %s has too many elements",
                         cn__shape_str(shape, ndim, b, sizeof b));
            return NULL;
        }
        numel *= shape[i];
    }
    return cn__record(CN__OP_EXPAND, cn__view(op, t, shape, strides, ndim, t->offset), &t, 1,
                      NULL, 0, NULL, 0);
}

cn_tensor *cn_squeeze(cn_tensor *t, int dim) {
    const char *op = "squeeze";
    CN__CHECK_LIVE(op, t);
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, t->ndim);
    if (d < 0) return NULL;
    if (t->ndim == 0)
        return cn__record(CN__OP_VIEW, cn__view(op, t, t->shape, t->strides, 0, t->offset), &t, 1,
                          NULL, 0, NULL, 0);
    if (t->shape[d] != 1) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, op, "dim %d of %s has size %lld, not 1; only size-1 dims can "
                     "be squeezed (use cn_reshape to change other sizes)", d,
                     cn_tensor_str(t, a, sizeof a), (long long)t->shape[d]);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS], strides[CN_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d) continue;
        shape[n] = t->shape[i];
        strides[n++] = t->strides[i];
    }
    return cn__record(CN__OP_VIEW, cn__view(op, t, shape, strides, n, t->offset), &t, 1, NULL, 0,
                      NULL, 0);
}

cn_tensor *cn_unsqueeze(cn_tensor *t, int dim) {
    const char *op = "unsqueeze";
    CN__CHECK_LIVE(op, t);
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    if (t->ndim == CN_MAX_DIMS) {
        cn_set_error(CN_ERR_SHAPE, op, "the tensor already has the maximum of %d dims",
                     CN_MAX_DIMS);
        return NULL;
    }
    int d = cn__norm_dim(op, "dim", dim, t->ndim + 1);
    if (d < 0) return NULL;
    int64_t shape[CN_MAX_DIMS], strides[CN_MAX_DIMS];
    int n = 0;
    for (int i = 0; i <= t->ndim; i++) {
        if (i == d) {
            shape[n] = 1;
            /* any stride works for a size-1 dim; this one keeps contiguity checks simple (1 when
             * it would overflow: an empty tensor's sizes may be huge) */
            int64_t s = 1;
            if (i < t->ndim && __builtin_mul_overflow(t->shape[i], t->strides[i], &s)) s = 1;
            strides[n++] = s;
        }
        if (i < t->ndim) {
            shape[n] = t->shape[i];
            strides[n++] = t->strides[i];
        }
    }
    return cn__record(CN__OP_VIEW, cn__view(op, t, shape, strides, n, t->offset), &t, 1, NULL, 0,
                      NULL, 0);
}

/* ---- the device flag: views that add or drop the autodiff wrapping (cinder/autodiff.h) ------- *
 * A new header over the same storage whose device says whether the autodiff layer wraps it; the
 * header carries no graph node, so these are how a tracked value leaves (or a concrete one enters)
 * the graph. */

static cn_tensor *rewrap(const char *op, cn_tensor *t, cn_device device) {
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    cn_tensor *v = cn__view(op, t, t->shape, t->strides, t->ndim, t->offset);
    if (v) v->device = device;
    return v;
}

cn_tensor *cn_detach(cn_tensor *t) { return rewrap("detach", t, t ? t->device : cn_cpu()); }

cn_tensor *cn_inner(cn_tensor *t) {
    return rewrap("inner", t, t ? cn_inner_device(t->device) : cn_cpu());
}

cn_tensor *cn_from_inner(cn_tensor *t, cn_device device) {
    const char *op = "from_inner";
    char a[128], b[64];
    if (t && (t->device.autodiff || !device.autodiff ||
              !cn_device_eq(t->device, cn_inner_device(device)))) {
        cn_set_error(CN_ERR_AUTODIFF_DEVICE, op, "'t' is %s and the target is %s; from_inner "
                     "takes a concrete tensor and the autodiff device over its own device, e.g. "
                     "cn_autodiff(cn_device_of(t))", cn_tensor_str(t, a, sizeof a),
                     cn_device_str(device, b, sizeof b));
        return NULL;
    }
    return rewrap(op, t, device);
}
