/* cn_ext_call: extension ops through the one router. It checks what only the schema says (union
 * tags, presence, declared kinds, tracking), leaves device choice and the context and device
 * checks to cn__route as every built-in op does, unwraps the inputs to the concrete views a kernel
 * expects, runs the kernel through cn__launch_kernel, and re-wraps the outputs (tracked on the
 * autodiff route: the autodiff layer records a node with the op's schema, its backward and a
 * replay of the concrete kernel). */
#include <string.h>

#include "autodiff/autodiff_internal.h"
#include "cinder/autodiff.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "dispatch/router.h"
#include "extension/extension_internal.h"

/* Checks what only the schema knows: union tags, presence (a member of an inactive variant must
 * be NULL, a required input must not), and that no input declared int or bool carries an autodiff
 * primitive (the message names the declared kind, not just the dtype the router would see). */
static cn_status check_inputs(const cn_ext_op *op, cn_tensor *const *t, const int *tags) {
    const cn_ext_schema *s = &op->schema;
    const char *name = s->name;
    for (int g = 0; g < s->n_groups; g++) {
        if (s->groups[g].kind != CN_EXT_UNION) continue;
        int tag = tags ? tags[g] : -1;
        if (tag < 0 || tag >= s->groups[g].n_variants)
            return cn_set_error(CN_ERR_INVALID_ARG, name, "union '%s' has tag %d; use a variant "
                                "index in [0, %d)", s->groups[g].name, tag,
                                s->groups[g].n_variants);
    }
    char buf[128];
    for (int i = 0; i < s->n_tensors; i++) {
        const cn_ext_tensor_arg *a = &s->tensors[i];
        int in_union = a->group >= 0 && s->groups[a->group].kind == CN_EXT_UNION;
        int active = !in_union || tags[a->group] == a->variant;
        if (!active && t[i])
            return cn_set_error(CN_ERR_INVALID_ARG, name, "'%s' belongs to variant '%s' of union "
                                "'%s', which is not the active one; pass NULL for it", a->name,
                                s->groups[a->group].variant_names[a->variant],
                                s->groups[a->group].name);
        if (!t[i]) {
            if (active && !a->optional) {
                cn__null_arg(name, a->name);
                return cn_last_status();
            }
            continue;
        }
        if (t[i]->autograd && a->kind != CN_KIND_FLOAT) {
            const char *k = a->kind == CN_KIND_INT ? "int" : a->kind == CN_KIND_BOOL ? "bool"
                                                                                    : "quantized";
            return cn_set_error(CN_ERR_AUTODIFF_NONFLOAT, name, "only float tensors may use an "
                                "autodiff primitive: input '%s' is declared %s but holds %s, "
                                "which carries one; pass a %s tensor (%s) and check the "
                                "argument order", a->name, k, cn_tensor_str(t[i], buf, sizeof buf),
                                k, a->kind == CN_KIND_QUANTIZED ? "cn_quantize makes untracked "
                                "ones" : "cn_cast drops tracking");
        }
    }
    return CN_OK;
}

/* Checks each present input's kind against the schema (after routing, as built-in ops do). */
static cn_status check_kinds(const cn_ext_schema *s, cn_tensor *const *t) {
    for (int i = 0; i < s->n_tensors; i++) {
        const cn_ext_tensor_arg *a = &s->tensors[i];
        if (t[i] && cn__check_kind(s->name, a->name, t[i], 1u << a->kind) != CN_OK)
            return cn_last_status();
    }
    return CN_OK;
}

/* Routes the present inputs (absent ones are NULL: left out, as the router takes tensors only)
 * through cn__route: the device (the first autodiff input's, else the first input's), the context
 * checks and the device checks, as for any built-in op. Returns the backend, or NULL with the
 * error set; CN_ERR_EXT_NO_TENSOR when every input is absent. */
static const cn_backend *route_inputs(const cn_ext_schema *s, cn_tensor *const *t, cn_device *device) {
    cn_tensor *small_t[8];
    const char *small_names[8];
    int big = s->n_tensors > 8;
    cn_tensor **present = big ? cn__calloc(s->name, (size_t)s->n_tensors, sizeof *present)
                              : small_t;
    const char **names = big ? cn__calloc(s->name, (size_t)s->n_tensors, sizeof *names)
                             : small_names;
    const cn_backend *b = NULL;
    int n = 0;
    /* quantized inputs pass through as they are on either route (never an autodiff primitive):
     * the others choose the device, and each quantized one must live there */
    int first_q = -1;
    for (int i = 0; present && names && i < s->n_tensors; i++) {
        if (t[i] && cn_dtype_kind(t[i]->dtype) == CN_KIND_QUANTIZED) {
            if (first_q < 0) first_q = i;
        } else if (t[i]) {
            present[n] = t[i];
            names[n++] = s->tensors[i].name;
        }
    }
    if (present && names && n == 0 && first_q >= 0) {
        present[n] = t[first_q]; /* only quantized inputs: the first one's device */
        names[n++] = s->tensors[first_q].name;
        *device = t[first_q]->device;
        cn_device concrete = *device;
        concrete.autodiff = 0;
        concrete.checkpoint = 0;
        b = cn__backend_for_device(s->name, concrete);
    } else if (present && names && n > 0) {
        b = cn__route(s->name, present, names, n, device);
    }
    for (int i = 0; b && i < s->n_tensors; i++)
        if (t[i] && cn_dtype_kind(t[i]->dtype) == CN_KIND_QUANTIZED &&
            (t[i]->device.backend != device->backend || t[i]->device.index != device->index)) {
            char x[128], y[128];
            cn_set_error(CN_ERR_DEVICE_MISMATCH, s->name, "'%s' is %s but '%s' is %s; move one "
                         "with cn_to_device(t, device) so both live on one device", names[0],
                         cn_tensor_str(present[0], x, sizeof x), s->tensors[i].name,
                         cn_tensor_str(t[i], y, sizeof y));
            b = NULL;
        }
    if (present && names && n == 0)
        cn_set_error(CN_ERR_EXT_NO_TENSOR, s->name, "every tensor input of '%s' is absent (NULL "
                     "optionals, tensor-less union variants), so there is no device to run on; "
                     "pass at least one tensor", s->name);
    if (big) {
        cn__free(present);
        cn__free((void *)names);
    }
    return b;
}

/* The autodiff invariants: a tracked float never reaches a concrete kernel silently. */
static cn_status check_tracking(const cn_ext_schema *s, cn_ext_backward_fn backward,
                                cn_ext_route route, cn_tensor *const *t, int *tracked_out) {
    int tracked = -1, plain = -1;
    for (int i = 0; i < s->n_tensors; i++) {
        if (!t[i] || cn_dtype_kind(t[i]->dtype) != CN_KIND_FLOAT) continue;
        if (t[i]->autograd && tracked < 0) tracked = i;
        if (!t[i]->autograd && plain < 0) plain = i;
    }
    *tracked_out = tracked >= 0 && cn_grad_enabled();
    if (tracked < 0 || !cn_grad_enabled()) return CN_OK;
    char buf[128];
    const char *in = s->tensors[tracked].name;
    cn_tensor_str(t[tracked], buf, sizeof buf);
    if (route == CN_EXT_ROUTE_CONCRETE)
        return cn_set_error(CN_ERR_AUTODIFF_REACHED_CONCRETE, s->name, "input '%s' (%s) is "
                            "tracked but the call is routed to the concrete kernel; detach it "
                            "with cn_inner(%s), call on the autodiff route, or keep "
                            "differentiating tensors inside tracked code", in, buf, in);
    if (!backward && !(s->flags & CN_EXT_NON_DIFFERENTIABLE))
        return cn_set_error(CN_ERR_AUTODIFF_REACHED_CONCRETE, s->name, "input '%s' (%s) is "
                            "tracked but '%s' has no backward, so only its concrete kernel could "
                            "run and the gradient would be lost; detach the input with "
                            "cn_inner(%s), register a backward for the op "
                            "(cn_ext_register_backward, or `autodiff` in its declaration), or "
                            "keep differentiating tensors inside tracked code", in, buf, s->name,
                            in);
    if ((s->flags & CN_EXT_SAME_TRACKING) && plain >= 0) {
        char pb[128];
        return cn_set_error(CN_ERR_EXT_MIXED_TRACKING, s->name, "'%s' (%s) is tracked but '%s' "
                            "(%s) is not, and '%s' needs all float inputs tracked alike; mark "
                            "both with cn_require_grad or detach both", in, buf,
                            s->tensors[plain].name, cn_tensor_str(t[plain], pb, sizeof pb),
                            s->name);
    }
    return CN_OK;
}

/* Allocates the outputs on `device` from the shape function and runs the kernel of backend b on
 * concrete views through the router's launch. */
static cn_status run_kernel(const cn_ext_schema *s, cn_kernel_fn kernel, const cn_backend *b,
                            cn_device device, cn_tensor *const *t, const int64_t *ints,
                            const double *reals, cn_tensor **outputs) {
    const char *name = s->name;
    cn_view small_in[8], small_out[4];
    cn_view *in = s->n_tensors <= 8 ? small_in : cn__calloc(name, (size_t)s->n_tensors, sizeof *in);
    cn_view *out = s->n_outputs <= 4 ? small_out : cn__calloc(name, (size_t)s->n_outputs,
                                                             sizeof *out);
    cn_status st = in && out ? CN_OK : CN_ERR_OUT_OF_MEMORY;
    for (int i = 0; st == CN_OK && i < s->n_tensors; i++) {
        memset(&in[i], 0, sizeof in[i]);
        if (t[i]) {
            cn__tensor_as_view(t[i], &in[i]);
            in[i].data = NULL; /* the shape function sees geometry only */
        } else {
            in[i].ndim = -1;
        }
    }
    for (int i = 0; st == CN_OK && i < s->n_outputs; i++) memset(&out[i], 0, sizeof out[i]);
    if (st == CN_OK) st = s->shape(in, s->n_tensors, ints, reals, out, s->n_outputs);
    if (st != CN_OK && cn_last_status() == CN_OK)
        cn_set_error(st, name, "the shape function of '%s' failed without a message", name);
    for (int i = 0; st == CN_OK && i < s->n_outputs; i++) {
        outputs[i] = cn__tensor_alloc(name, out[i].shape, out[i].ndim, out[i].dtype, device);
        if (!outputs[i]) st = cn_last_status();
        else cn__tensor_as_view(outputs[i], &out[i]);
    }
    for (int i = 0; st == CN_OK && i < s->n_tensors; i++)
        if (t[i]) cn__tensor_as_view(t[i], &in[i]);
    if (st == CN_OK)
        st = cn__launch_kernel(name, kernel, b, device, CN_OP_COUNT, in, s->n_tensors, out,
                               s->n_outputs, ints, s->n_ints, reals, s->n_reals, NULL);
    for (int i = 0; st == CN_OK && i < s->n_outputs; i++) outputs[i]->storage->version++;
    if (st != CN_OK)
        for (int i = 0; i < s->n_outputs; i++) {
            cn_release(outputs[i]);
            outputs[i] = NULL;
        }
    if (in != small_in) cn__free(in);
    if (out != small_out) cn__free(out);
    return st;
}

/* An op declared without tensor inputs (a generator, e.g. an iota) runs on the one backend it
 * has a kernel for, device 0, on the concrete route: there is nothing to choose a device from. */
static cn_status call_without_tensors(const cn_ext_op *op, const int64_t *ints,
                                      const double *reals, cn_tensor **outputs) {
    const char *name = op->schema.name;
    int found = -1, count = 0;
    for (int id = 0; id < CN_MAX_BACKENDS; id++)
        if (cn__ext_kernel(op, id)) {
            found = id;
            count++;
        }
    if (count != 1)
        return cn_set_error(CN_ERR_EXT_NO_TENSOR, name, "'%s' has no tensor inputs and kernels "
                            "for %d backends, so there is no way to choose one; give it a tensor "
                            "input, or register its kernel for exactly one backend", name, count);
    cn_device device = {(int16_t)found, 0, 0, 0};
    const cn_backend *b = cn__backend_for_device(name, device);
    if (!b) return cn_last_status();
    return run_kernel(&op->schema, op->kernels[found], b, device, NULL, ints, reals, outputs);
}

/* The replay a checkpointed extension node runs in backward: the op on the concrete route. */
static cn_status replay_concrete(const cn_ext_op *op, cn_tensor *const *in, const int *tags,
                                 const int64_t *ints, const double *reals, cn_tensor **outputs) {
    return cn_ext_call(op, CN_EXT_ROUTE_CONCRETE, in, tags, ints, reals, outputs);
}

cn_status cn_ext_call(const cn_ext_op *op, cn_ext_route route, cn_tensor *const *tensors,
                      const int *tags, const int64_t *ints, const double *reals,
                      cn_tensor **outputs) {
    if (!op || !outputs || (op->schema.n_tensors && !tensors)) {
        cn__null_arg("ext_call", !op ? "op" : !outputs ? "outputs" : "tensors");
        return cn_last_status();
    }
    const cn_ext_schema *s = &op->schema;
    for (int i = 0; i < s->n_outputs; i++) outputs[i] = NULL;
    if ((s->n_ints && !ints) || (s->n_reals && !reals)) {
        cn__null_arg(s->name, !ints ? "ints" : "reals");
        return cn_last_status();
    }
#ifdef CINDER_CHECK_MISUSE
    for (int i = 0; i < s->n_tensors; i++) CN__CHECK_LIVE(s->name, tensors[i]);
#endif
    if (check_inputs(op, tensors, tags) != CN_OK) return cn_last_status();
    if (s->n_tensors == 0) return call_without_tensors(op, ints, reals, outputs);
    cn_device device;
    const cn_backend *b = route_inputs(s, tensors, &device);
    if (!b) return cn_last_status();
    /* read once: a backward registered while this call runs is used by both or by neither */
    cn_ext_backward_fn backward = op->backward;
    int tracked;
    if (check_kinds(s, tensors) != CN_OK ||
        check_tracking(s, backward, route, tensors, &tracked) != CN_OK)
        return cn_last_status();
    if (route == CN_EXT_ROUTE_CONCRETE) device = cn_inner_device(device);
    cn_kernel_fn kernel = cn__ext_kernel(op, device.backend);
    if (!kernel)
        return cn_set_error(CN_ERR_NO_KERNEL, s->name, "extension op '%s' has no kernel for "
                            "backend '%s'; register one with cn_ext_register_kernel (or list the "
                            "backend in the op's declaration), or move the inputs to a backend "
                            "that has one", s->name, b->name);
    cn_status st = run_kernel(s, kernel, b, device, tensors, ints, reals, outputs);
    if (st == CN_OK && tracked && device.autodiff && !(s->flags & CN_EXT_NON_DIFFERENTIABLE))
        st = ad_ext_record(op, s, backward, replay_concrete, tensors, tags, ints, reals, outputs);
    return st;
}
