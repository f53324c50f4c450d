/* cinder: backend extensions — user-defined ops with a kernel per backend and an optional
 * backward, routed exactly like built-in ops.
 *
 * An op is defined from a schema (its tensor inputs, attributes and outputs), then given a kernel
 * per backend (cn_ext_register_kernel, same signature as built-in kernels: see backend.h) and,
 * optionally, a backward (cn_ext_register_backward) that makes it differentiable. Calls
 * (cn_ext_call) go through the router that built-in ops use, so the device rules live in one
 * place. A call:
 *   1. checks what only the schema says: union tags, which inputs are present, and that no input
 *      declared int or bool carries an autodiff primitive;
 *   2. routes the present inputs as every built-in op is routed: the device is that of the first
 *      input on an autodiff device, else that of the first input; all inputs must share backend,
 *      device index and checkpointing strategy; malformed autodiff contexts are refused;
 *   3. checks each input's kind against the schema, and the tracking invariants (each a distinct
 *      status code, see error.h);
 *   4. takes the route: autodiff when that device is an autodiff device, else concrete
 *      (CN_EXT_ROUTE_CONCRETE forces concrete); runs the kernel registered for the device's
 *      backend (CN_ERR_NO_KERNEL when there is none) on concrete views of the inputs, into outputs
 *      allocated from the op's shape function, through the same launch as built-in kernels;
 *   5. re-wraps the outputs: on the autodiff route float outputs become tracked (when an input is
 *      tracked and grad mode is on) and int/bool outputs stay untracked on the autodiff device.
 * An op declared without tensor inputs has no device to route by: it runs on device 0 of the one
 * backend it has a kernel for, on the concrete route.
 * A tracked float input never reaches a concrete kernel silently: without a backward the call
 * fails with CN_ERR_AUTODIFF_REACHED_CONCRETE, unless the op was declared non-differentiable
 * (CN_EXT_NON_DIFFERENTIABLE), in which case its outputs are untracked by the author's choice.
 *
 * Most users do not call this API by hand: `cinder-extgen` generates a typed function per op
 * from a declaration file (see docs/extensions.md). */
#ifndef CINDER_EXTENSION_H
#define CINDER_EXTENSION_H

#include "cinder/api.h"

#include <stdint.h>

#include "cinder/backend.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- schema -------------------------------------------------------------------------------- */

/* A composite input groups several tensor inputs: a struct (all members present, unless
 * optional) or a tagged union (only the members of the active variant are present; a variant may
 * hold no tensor at all). */
typedef enum cn_ext_group_kind { CN_EXT_STRUCT = 1, CN_EXT_UNION = 2 } cn_ext_group_kind;

typedef struct cn_ext_group {
    const char *name;
    cn_ext_group_kind kind;
    int n_variants;                   /* unions: number of variants (>= 1) */
    const char *const *variant_names; /* unions: n_variants names */
} cn_ext_group;

/* One tensor input, in call order. Members of a composite name it in `group`. */
typedef struct cn_ext_tensor_arg {
    const char *name;  /* "x", or "params.w" for a member */
    /* CN_KIND_FLOAT, CN_KIND_INT, CN_KIND_BOOL or CN_KIND_QUANTIZED. A quantized input
     * (cinder/quant.h) passes through unchanged on the concrete and the autodiff route (never
     * tracked, never an autodiff primitive; it must live on the device the other inputs
     * choose); its kernel view has the scheme as dtype, the logical shape, strides in storage
     * elements and `data` at the first byte of its storage: pass cn_quant_layout's offset,
     * group and scales_at as int attributes to read values and scales. */
    cn_kind kind;
    int optional;      /* non-zero: may be NULL */
    int group;         /* index into the schema's groups, or -1 for a plain input */
    int variant;       /* union members: the variant that holds this tensor */
} cn_ext_tensor_arg;

/* Output geometry, computed from the inputs' geometry and the attributes before the kernel runs.
 * `in` views have data == NULL; an absent input has ndim == -1. Fill out[i].dtype, .ndim and
 * .shape; return CN_OK, or an error via cn_set_error (e.g. CN_ERR_SHAPE) for bad inputs. */
typedef cn_status (*cn_ext_shape_fn)(const cn_view *in, int n_in, const int64_t *ints,
                                     const double *reals, cn_view *out, int n_out);

/* Backward: given the concrete input values (NULL where absent), the concrete outputs, and the
 * gradient of each output (never NULL: zeros where an output received none), writes a gradient
 * for each input with needs_grad[i] != 0 into grad_in, and may skip the others (like PyTorch's
 * ctx.needs_input_grad: a data batch needs none, and its gradient can be the most expensive
 * one). Runs under no-grad mode on the inner device, inside a scope the runtime opens and ends
 * when the backward returns; use any public ops, including extension ops. Return CN_OK or an
 * error status (error set).
 *
 * Each gradient has the input's shape, dtype and (concrete) device; any other is an error
 * (CN_ERR_SHAPE, CN_ERR_DTYPE, CN_ERR_DEVICE_MISMATCH) naming the op and the input.
 *
 * Ownership, one rule: each grad_in entry hands one reference to cinder.
 *   - A tensor the backward made (an op's result) is written as it is: cinder takes it out of the
 *     backward's scope. Do not cn_retain it, and do not release it.
 *   - A tensor it was given (in[], out[], grad_out[]) is written cn_retain-ed, once per entry:
 *     grad_in[i] = cn_retain(grad_out[0]). So is a made tensor written into a second entry.
 *   - Every other temporary is released with the scope (releasing it earlier is fine).
 * A result that breaks the rule (a cn_retain too many, or a given tensor without one) fails the
 * backward with CN_ERR_INVALID_ARG naming the op and the input; the references it handed over
 * are dropped, so nothing leaks. A result released before returning is caught by debug builds
 * (CINDER_CHECK_MISUSE). */
typedef cn_status (*cn_ext_backward_fn)(cn_tensor *const *in, const int *needs_grad, int n_in,
                                        cn_tensor *const *out, cn_tensor *const *grad_out,
                                        int n_out, const int64_t *ints, const double *reals,
                                        cn_tensor **grad_in);

/* Schema flags. */
#define CN_EXT_NON_DIFFERENTIABLE 1u /* outputs are untracked by design (like mark_non_differentiable) */
#define CN_EXT_MEMORY_BOUND 2u       /* under checkpointing, recompute instead of keeping outputs */
#define CN_EXT_SAME_TRACKING 4u      /* float inputs must be all tracked or all untracked */

typedef struct cn_ext_schema {
    const char *name;                     /* unique; used in every message */
    int n_tensors;
    const cn_ext_tensor_arg *tensors;
    int n_groups;
    const cn_ext_group *groups;
    int n_ints;                           /* integer attributes */
    const char *const *int_names;
    int n_reals;                          /* real attributes */
    const char *const *real_names;
    int n_outputs;                        /* >= 1 */
    const char *const *output_names;
    cn_ext_shape_fn shape;                /* required */
    unsigned flags;
} cn_ext_schema;

typedef struct cn_ext_op cn_ext_op;

/* Defines an op (the schema and its strings are copied). NULL with CN_ERR_INVALID_ARG on a
 * malformed schema (no outputs, unknown kinds, a union member naming a missing variant, a taken
 * name, ...). Ops live until the process ends. */
CN_API const cn_ext_op *cn_ext_define(const cn_ext_schema *schema);

/* The op defined under name, or NULL. */
CN_API const cn_ext_op *cn_ext_find(const char *name);

/* Registers the kernel of `op` for the backend named `backend` ("cpu", "cuda", or a program's
 * own). A backend not registered yet (a module not loaded yet, as cuda is until a GPU is first
 * asked for) keeps the kernel by name until it is (at most 4 such backends an op): registering
 * never loads a module, so a program that never uses a GPU never loads CUDA's libraries. The
 * kernel receives the inputs in schema order (absent ones: data NULL, ndim -1), ints/reals as
 * attributes and args->op == CN_OP_COUNT (an extension). One kernel per backend: registering the
 * same function again changes nothing; a different one is refused (CN_ERR_INVALID_ARG) and the
 * first stays. A NULL backend or kernel is CN_ERR_NULL_ARG; an empty name or one of 48 characters
 * or more, CN_ERR_INVALID_ARG; a NULL op keeps the error of the call that produced it. */
CN_API cn_status cn_ext_register_kernel(const cn_ext_op *op, const char *backend, cn_kernel_fn kernel);

/* 1 when `op` has a kernel for the concrete backend of `device` (its autodiff flag ignored), so
 * that a call with inputs there can run; 0 otherwise, a NULL op or an invalid device included.
 * Sets no error. A program picks its path with it: a fused op where it has a kernel, the
 * composition of built-in ops elsewhere (as `cinder train` does for its MLP). Any thread. */
CN_API int cn_ext_has_kernel(const cn_ext_op *op, cn_device device);

/* Registers the backward of `op`, which makes it differentiable. As for kernels: one backward
 * per op (a different second one is refused), a NULL backward is CN_ERR_NULL_ARG, and an op
 * defined with CN_EXT_NON_DIFFERENTIABLE refuses one (CN_ERR_INVALID_ARG). */
CN_API cn_status cn_ext_register_backward(const cn_ext_op *op, cn_ext_backward_fn backward);

/* ---- calling ------------------------------------------------------------------------------- */

typedef enum cn_ext_route {
    CN_EXT_ROUTE_AUTO = 0,     /* autodiff when an input is on an autodiff device */
    CN_EXT_ROUTE_CONCRETE = 1, /* force the concrete kernels: tracked inputs are an error */
} cn_ext_route;

/* Calls op. tensors: n_tensors entries in schema order (NULL for absent optional inputs and for
 * members of inactive union variants); tags: one per group (the active variant of each union;
 * ignored for structs; may be NULL when there are no unions); ints/reals: the attributes.
 * On success writes n_outputs new references into outputs and returns CN_OK; on failure returns
 * the status with the error set, writes NULLs, and leaves the inputs untouched. */
CN_API cn_status cn_ext_call(const cn_ext_op *op, cn_ext_route route, cn_tensor *const *tensors,
                      const int *tags, const int64_t *ints, const double *reals,
                      cn_tensor **outputs);

#ifdef __cplusplus
}
#endif
#endif
