/* The router: the checks every op shares, and the one call into a backend's kernel. The op files
 * (ops_*.c) are front-ends: each computes its output geometry and then calls cn__launch. */
#ifndef CINDER_DISPATCH_ROUTER_H
#define CINDER_DISPATCH_ROUTER_H

#include <stdatomic.h>

#include "cinder/backend.h"
#include "core/op_table.h"
#include "core/quant.h"
#include "core/tensor_impl.h"

/* Checks the n inputs are non-NULL and share one device; writes it to *device. Returns the
 * device's backend, or NULL with the error set (NULL inputs keep the earlier error). names[i]
 * names input i in messages ("a", "b", "x"). */
const cn_backend *cn__route(const char *op, cn_tensor *const *in, const char *const *names, int n,
                            cn_device *device);

/* cn__route, then the checks of an op on floats of one dtype: every input float (cn__check_kind)
 * and of in[lead]'s dtype (cn__check_same_dtype, naming names[lead]). NULL with the error of the
 * first that fails. */
const cn_backend *cn__route_floats(const char *op, cn_tensor *const *in, const char *const *names,
                                   int n, int lead, cn_device *device);

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

/* ---- quantized tensors (quant.c) ---------------------------------------------------------- */

/* Checks that a view of quantized t with this geometry keeps its blocks whole (CN_OK for the
 * dtypes without blocks); else CN_ERR_INVALID_ARG naming op, t and why. */
cn_status cn__quant_view_check(const char *op, const cn_tensor *t, const int64_t *shape,
                               const int64_t *strides, int ndim, int64_t offset);
/* A view of t (cn__tensor_view) after the quantized check: what every view front-end calls. */
static inline cn_tensor *cn__view(const char *op, cn_tensor *t, const int64_t *shape,
                                  const int64_t *strides, int ndim, int64_t offset) {
    if (cn__quant_is_block(t->dtype) &&
        cn__quant_view_check(op, t, shape, strides, ndim, offset) != CN_OK)
        return NULL;
    return cn__tensor_view(t, shape, strides, ndim, offset);
}
/* The error for a copy of quantized t into a new layout (never made): CN_ERR_INVALID_ARG. */
cn_status cn__quant_no_copy(const char *op, const cn_tensor *t, const char *why);
/* Quantized t on another device (or index): the whole storage copied, t's geometry kept. */
cn_tensor *cn__quant_to_device(const char *op, cn_tensor *t, cn_device device);

/* Checks a and b share a dtype. */
cn_status cn__check_same_dtype(const char *op, const char *an, const cn_tensor *a, const char *bn,
                               const cn_tensor *b);

/* NumPy broadcasting of two shapes into out (ndim *out_ndim). */
cn_status cn__broadcast_shapes(const char *op, const char *an, const cn_tensor *a, const char *bn,
                               const cn_tensor *b, int64_t *out, int *out_ndim);

/* Checks t is 4-D, else CN_ERR_SHAPE naming op, the argument and `want` ("[N, C, H, W]"), with
 * cn_unsqueeze as the way out (ops_conv.c). */
cn_status cn__check_4d(const char *op, const char *arg, const cn_tensor *t, const char *want);

/* Drops dim d (size 1) from a fresh contiguous tensor's header: still contiguous (the
 * reductions' and scans' outputs without keepdim; ops_reduce.c). */
void cn__drop_dim(cn_tensor *t, int d);

/* A view of t stretched to shape (t broadcasts to it: checked by the caller). */
void cn__broadcast_view(const cn_tensor *t, const int64_t *shape, int ndim, cn_view *v);

/* Calls backend b's kernel for op with the given views and attributes. A missing kernel is
 * CN_ERR_NO_KERNEL naming op and backend. Bumps the version of the outputs' storage. */
cn_status cn__launch(const cn_backend *b, cn_device device, cn_op op, const cn_view *in, int n_in,
                     cn_tensor *const *out, int n_out, const int64_t *ints, int n_ints,
                     const double *reals, int n_reals);

/* The one call into a kernel, for built-in ops (cn__launch_views) and extension ops
 * (cn_ext_call) alike: runs k, of backend b, for op (CN_OP_COUNT for an extension op) on device's
 * index with the given views, attributes and, for a window op, its geometry (else NULL). Outputs
 * that are all empty skip the kernel. A kernel that fails without setting an error gets one
 * naming the op (`name`; NULL for a built-in op: cn_op_name(op)) and the backend. Does not bump
 * the outputs' versions (the caller owns the tensors). Inline: it is on every op's path. */
cn_status cn__kernel_failed_silently(const char *name, const cn_backend *b, cn_op op,
                                     cn_status s);
static inline cn_status cn__launch_kernel(const char *name, cn_kernel_fn k, const cn_backend *b,
                                          cn_device device, cn_op op, const cn_view *in,
                                          int n_in, const cn_view *out, int n_out,
                                          const int64_t *ints, int n_ints, const double *reals,
                                          int n_reals, const cn_conv_geometry *conv) {
    /* Outputs without elements: nothing to compute. Kernels never see them, so their index
     * math need not guard against the huge sizes an empty shape may have ([2^62, 0]). */
    int empty = n_out > 0;
    for (int i = 0; i < n_out && empty; i++) {
        int zero = 0;
        for (int d = 0; d < out[i].ndim; d++) zero |= out[i].shape[d] == 0;
        empty = zero;
    }
    if (empty) return CN_OK;
    cn_kernel_args args = {.op = op, .device = device.index, .n_in = n_in, .in = in,
                           .n_out = n_out, .out = out, .n_ints = n_ints, .ints = ints,
                           .n_reals = n_reals, .reals = reals, .ctx = b->ctx, .conv = conv};
    cn_status s = k(&args);
    return s == CN_OK ? CN_OK : cn__kernel_failed_silently(name, b, op, s);
}

/* What the router refuses before any kernel of a built-in op runs: an op the backend has no
 * kernel for (CN_ERR_NO_KERNEL) and a dtype its kernel does not take (CN_ERR_DTYPE, from
 * b->dtypes[op]), each naming op, dtype and backend. cn__kernel_refused sets whichever applies to
 * op on b for the value dtype dt, and returns its status. */
cn_status cn__no_kernel(const cn_backend *b, cn_op op);
cn_status cn__dtype_unsupported(const cn_backend *b, cn_op op, cn_dtype dtype);
cn_status cn__kernel_refused(const cn_backend *b, cn_op op, cn_dtype dt);

/* The kernel of op on b for these views, or NULL (error set) when the router refuses it. */
static inline cn_kernel_fn cn__kernel_for(const cn_backend *b, cn_op op, const cn_view *in,
                                          int n_in, const cn_view *out) {
    cn_kernel_fn k = b->kernels[op];
    uint32_t dtypes = b->dtypes[op];
    if (k && !dtypes) return k;
    /* the first value input's dtype; the output's for the ops without inputs */
    int v = cn__op_decl_of((int)op)->value_from;
    cn_dtype dt = n_in == 0 ? out[0].dtype : in[v < n_in ? v : 0].dtype;
    if (k && ((dtypes >> dt) & 1u)) return k;
    cn__kernel_refused(b, op, dt);
    return NULL;
}

/* cn__launch, writing into explicit output views (copy into a slice). */
static inline cn_status cn__launch_views(const cn_backend *b, cn_device device, cn_op op,
                                         const cn_view *in, int n_in, const cn_view *out,
                                         int n_out, const int64_t *ints, int n_ints,
                                         const double *reals, int n_reals) {
    cn_kernel_fn k = cn__kernel_for(b, op, in, n_in, out);
    if (!k) return cn_last_status();
    return cn__launch_kernel(NULL, k, b, device, op, in, n_in, out, n_out, ints, n_ints, reals,
                             n_reals, NULL);
}

/* ---- the layer above: autodiff ------------------------------------------------------------ *
 * The router knows nothing of gradients. After a front-end has computed an op's output on an
 * autodiff device, it hands the output to whatever recording layer has registered itself (as
 * PyTorch's autograd registers for its dispatch key): the autodiff layer does, when it makes its
 * first graph node. Before that no tensor is tracked, so there is nothing to record. */
typedef cn_tensor *(*cn__record_fn)(int op, cn_tensor *out, cn_tensor *const *in, int n,
                                    const int64_t *ints, int n_ints, const double *reals,
                                    int n_reals);
extern _Atomic(cn__record_fn) cn__record_layer;

/* Registers the recording layer (any thread; the same function each time). */
void cn__register_record_layer(cn__record_fn fn);

/* Whether the recording layer records in this thread now (its grad mode): registered beside
 * it, by the same layer. Before that no tensor is tracked, so nothing would be recorded. */
typedef int (*cn__grad_mode_fn)(void);
extern _Atomic(cn__grad_mode_fn) cn__grad_mode_layer;
void cn__register_grad_mode_layer(cn__grad_mode_fn fn);

/* Whether an op on device dev with inputs in[0..n) (NULLs skipped) will be recorded: dev is an
 * autodiff device, an input is tracked and grad mode is on. A front-end asks it before computing
 * what only the backward reads (linear_gelu's gelu'). */
static inline int cn__will_record(cn_device dev, cn_tensor *const *in, int n) {
    int tracked = 0;
    for (int i = 0; i < n; i++) tracked |= in[i] && in[i]->autograd;
    if (!dev.autodiff || !tracked) return 0;
    cn__grad_mode_fn mode = atomic_load_explicit(&cn__grad_mode_layer, memory_order_acquire);
    return mode ? mode() : 0;
}

/* Records out = op(in...) when out lives on an autodiff device (op: a row of core/op_table.h).
 * Returns out, or NULL (out released, error set) when recording fails. */
static inline cn_tensor *cn__record(int op, cn_tensor *out, cn_tensor *const *in, int n,
                                    const int64_t *ints, int n_ints, const double *reals,
                                    int n_reals) {
    if (!out || !out->device.autodiff) return out; /* the concrete route records nothing */
    cn__record_fn record = atomic_load_explicit(&cn__record_layer, memory_order_acquire);
    return record ? record(op, out, in, n, ints, n_ints, reals, n_reals) : out;
}

/* Runs elementwise op `op` (a row of the op table of an elementwise family) on in[0..n_in) with
 * its attributes (ints, reals: as many as its row says); target is the output dtype of cast.
 * Every elementwise front-end, and the autodiff layer's replay, come through here. */
cn_tensor *cn__elementwise(cn_op op, cn_tensor *const *in, const int64_t *ints,
                           const double *reals, cn_dtype target);

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

/* cn__launch for a window op (conv2d, the pools, their backward kernels): the kernel reads the
 * geometry, computed and checked once by the front-end, as args->conv. */
cn_status cn__launch_geom(const cn_backend *b, cn_device device, cn_op op, const cn_view *in,
                          int n_in, cn_tensor *const *out, int n_out, const int64_t *ints,
                          int n_ints, const cn_conv_geometry *conv);

#endif
