/* The router: the checks every op shares, and the one call into a backend's kernel. The op files
 * (ops_*.c) are front-ends: each computes its output geometry and then calls cn__launch. */
#ifndef CINDER_DISPATCH_ROUTER_H
#define CINDER_DISPATCH_ROUTER_H

#include "cinder/backend.h"
#include "core/tensor_impl.h"

/* Kinds an op accepts, as a mask of (1 << cn_kind). */
#define CN_KINDS_FLOAT (1u << CN_KIND_FLOAT)
#define CN_KINDS_INT (1u << CN_KIND_INT)
#define CN_KINDS_BOOL (1u << CN_KIND_BOOL)
#define CN_KINDS_NUMERIC (CN_KINDS_FLOAT | CN_KINDS_INT)
#define CN_KINDS_ALL (CN_KINDS_FLOAT | CN_KINDS_INT | CN_KINDS_BOOL)

/* Checks the n inputs are non-NULL and share one device; writes it to *device. Returns the
 * device's backend, or NULL with the error set (NULL inputs keep the earlier error). names[i]
 * names input i in messages ("a", "b", "x"). */
const cn_backend *cn__route(const char *op, cn_tensor *const *in, const char *const *names, int n,
                            cn_device *device);

/* Checks t is well formed for routing: no graph node on an int/bool tensor
 * (CN_ERR_AUTODIFF_NONFLOAT), no checkpointing context on a plain device
 * (CN_ERR_AUTODIFF_PLAIN_ENABLED). */
cn_status cn__check_context(const char *op, const char *arg, const cn_tensor *t);

/* Checks t's kind is in mask; the message names arg and suggests a cast. */
cn_status cn__kind_error(const char *op, const char *arg, const cn_tensor *t, unsigned mask);
static inline cn_status cn__check_kind(const char *op, const char *arg, const cn_tensor *t,
                                       unsigned mask) {
    return (mask >> cn__dtype_kind(t->dtype)) & 1u ? CN_OK : cn__kind_error(op, arg, t, mask);
}

/* Checks a and b share a dtype. */
cn_status cn__check_same_dtype(const char *op, const char *an, const cn_tensor *a, const char *bn,
                               const cn_tensor *b);

/* NumPy broadcasting of two shapes into out (ndim *out_ndim). */
cn_status cn__broadcast_shapes(const char *op, const char *an, const cn_tensor *a, const char *bn,
                               const cn_tensor *b, int64_t *out, int *out_ndim);

/* A view of t stretched to shape (t broadcasts to it: checked by the caller). */
void cn__broadcast_view(const cn_tensor *t, const int64_t *shape, int ndim, cn_view *v);

/* Calls backend b's kernel for op with the given views and attributes. A missing kernel is
 * CN_ERR_NO_KERNEL naming op and backend. Bumps the version of the outputs' storage. */
cn_status cn__launch(const cn_backend *b, cn_device device, cn_op op, const cn_view *in, int n_in,
                     cn_tensor *const *out, int n_out, const int64_t *ints, int n_ints,
                     const double *reals, int n_reals);

/* Same, writing into explicit output views (copy into a slice). */
cn_status cn__no_kernel(const cn_backend *b, cn_op op);
static inline cn_status cn__launch_views(const cn_backend *b, cn_device device, cn_op op,
                                         const cn_view *in, int n_in, const cn_view *out,
                                         int n_out, const int64_t *ints, int n_ints,
                                         const double *reals, int n_reals) {
    cn_kernel_fn k = b->kernels[op];
    if (!k) return cn__no_kernel(b, op);
    /* Outputs without elements: nothing to compute. Kernels never see them, so their index
     * math need not guard against the huge sizes an empty shape may have ([2^62, 0]). */
    int empty = n_out > 0;
    for (int i = 0; i < n_out && empty; i++) {
        int zero = 0;
        for (int d = 0; d < out[i].ndim; d++) zero |= out[i].shape[d] == 0;
        empty = zero;
    }
    if (empty) return CN_OK;
    cn_kernel_args args = {op,   device.index, n_in,  in,    n_out, out,
                           n_ints, ints,       n_reals, reals, b->ctx};
    return k(&args);
}

/* The autodiff route: records out = op(in...) in the graph when out lives on an autodiff device
 * and an input is tracked (autodiff/graph.c). Returns out, or NULL (out released) on failure. */
cn_tensor *cn__ad_record(int op, cn_tensor *out, cn_tensor *const *in, int n, const int64_t *ints,
                         int n_ints, const double *reals, int n_reals);

static inline cn_tensor *cn__record(int op, cn_tensor *out, cn_tensor *const *in, int n,
                                    const int64_t *ints, int n_ints, const double *reals,
                                    int n_reals) {
    if (!out || !out->device.autodiff) return out; /* the concrete route records nothing */
    return cn__ad_record(op, out, in, n, ints, n_ints, reals, n_reals);
}

/* Copies src into the (same-shaped) view dst of another tensor, converting dtype. */
cn_status cn__copy_into(cn_tensor *dst, const cn_view *dst_view, cn_tensor *src);

/* Non-zero when two elements of t may be one memory location (a stride 0 over a dim of size > 1,
 * or strides that interleave): an in-place write to t would land on them more than once. */
int cn__overlaps_itself(const cn_tensor *t);

/* The in-place copy of all of src (broadcast to dst's shape) into dst, for op (cn_copy_): a dst
 * that overlaps itself is refused (CN_ERR_INVALID_ARG, nothing written); a src that shares memory
 * with dst, other than element for element, is read whole into a temporary first, so the result
 * is as if src had been read before any write. Bumps dst's version. */
cn_status cn__copy_inplace(const char *op, cn_tensor *dst, cn_tensor *src);

/* Checks that the user's scalar v (argument arg of op) converts to integer dtype `dtype`: after
 * truncation toward zero it must lie in the dtype's range, and not be NaN (CN_ERR_INVALID_ARG
 * otherwise). Float and bool dtypes accept any value. */
cn_status cn__check_int_scalar(const char *op, const char *arg, double v, cn_dtype dtype);

#endif
