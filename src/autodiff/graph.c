/* The graph: recording nodes, leaves, the autodiff device, no-grad mode, and in-place writes. */
#include <string.h>

#include "autodiff/autodiff_internal.h"
#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/thread_exit.h"
#include "dispatch/router.h"

static _Thread_local int no_grad_depth;

void cn_no_grad_begin(void) { no_grad_depth++; }
void cn_no_grad_end(void) {
    if (no_grad_depth > 0) no_grad_depth--;
}
int cn_grad_enabled(void) { return no_grad_depth == 0; }

/* ---- nodes --------------------------------------------------------------------------------- */

ad_node *ad_node_retain(ad_node *n) {
    if (n) cn__ref_take(&n->refcount);
    return n;
}

/* ---- node memory ---------------------------------------------------------------------------- *
 * Every tracked op makes a node and most die soon after (the graph is freed after each backward),
 * so nodes of up to SMALL_NODE_INPUTS inputs (nearly all) are made at that size and recycled per
 * thread: calloc and free cost more than recording the op. A recycled node still counts as an
 * allocation for the failure-injection mode. */

#define SMALL_NODE_INPUTS 3
#define NODE_CACHE_SLOTS 64

static _Thread_local struct {
    ad_node *items[NODE_CACHE_SLOTS];
    int count;
} node_cache;

static _Thread_local int node_cache_armed; /* this thread's exit hook is set */

/* At a thread's exit, its cached nodes go back to the C library. */
static void free_node_cache(void) {
    node_cache_armed = 0;
    while (node_cache.count > 0) cn__free(node_cache.items[--node_cache.count]);
}

static cn__thread_exit node_cache_exit = CN__THREAD_EXIT_INIT(free_node_cache);

static size_t node_bytes(int n_in) {
    int slots = n_in <= SMALL_NODE_INPUTS ? SMALL_NODE_INPUTS : n_in;
    return sizeof(ad_node) + sizeof(ad_input) * (size_t)slots;
}

static ad_node *node_alloc(int n_in) {
    size_t bytes = node_bytes(n_in);
    if (n_in > SMALL_NODE_INPUTS || node_cache.count == 0) return cn__calloc("autodiff", 1, bytes);
    if (cn__alloc_should_fail()) {
        cn_set_error(CN_ERR_OUT_OF_MEMORY, "autodiff", "could not allocate %zu bytes of host "
                     "memory; free tensors you no longer need (cn_release, scopes) or use smaller "
                     "batches", bytes);
        return NULL;
    }
    ad_node *n = node_cache.items[--node_cache.count];
    memset(n, 0, bytes);
    return n;
}

static void node_free(ad_node *n) {
    if (n->n_in <= SMALL_NODE_INPUTS && node_cache.count < NODE_CACHE_SLOTS) {
        if (!node_cache_armed) {
            node_cache_armed = 1;
            cn__thread_exit_arm(&node_cache_exit);
        }
        node_cache.items[node_cache.count++] = n;
    }
    else
        cn__free(n);
}

/* Frees nodes iteratively: a long chain would otherwise recurse once per node. The `grad` field
 * of a dying node links the list of nodes still to free. */
void ad_node_release(ad_node *n) {
    if (!n || !cn__ref_drop(&n->refcount)) return;
    ad_node *to_free = n;
    n->grad = NULL;
    while (to_free) {
        ad_node *cur = to_free;
        to_free = (ad_node *)cur->grad;
        for (int i = 0; i < cur->n_in; i++) {
            cn_release(cur->in[i].saved);
            ad_node *next = cur->in[i].node;
            if (next && cn__ref_drop(&next->refcount)) {
                next->grad = (cn_tensor *)to_free;
                to_free = next;
            }
        }
        cn_release(cur->saved_out);
        cn_release(cur->value);
        ad_ext_free(cur->ext);
        node_free(cur);
    }
}

static void free_tensor_node(cn_tensor *t) {
    ad_node_release(t->autograd);
    t->autograd = NULL;
}

/* A header over t's storage on the concrete device, owned by the caller and by no scope. */
cn_tensor *ad_concrete(cn_tensor *t) {
    cn_tensor *c = cn__tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
    if (!c) return NULL;
    cn__scope_forget(c);
    c->device = cn_inner_device(t->device);
    return c;
}

ad_node *ad_node_new(int op, int n_in, const cn_tensor *out) {
    /* the hooks of the layers below: core frees a dying tensor's node, the router records ops
     * on autodiff devices. No tensor is tracked before the first node, so setting them here is
     * in time; the same functions whichever thread stores them first. */
    if (!atomic_load_explicit(&cn__autograd_free, memory_order_relaxed)) {
        atomic_store_explicit(&cn__autograd_free, free_tensor_node, memory_order_relaxed);
        cn__register_grad_mode_layer(cn_grad_enabled);
        cn__register_record_layer(ad_record);
    }
    ad_node *n = node_alloc(n_in);
    if (!n) return NULL;
    atomic_store_explicit(&n->refcount, 1, memory_order_relaxed);
    n->op = op;
    n->n_in = n_in;
    n->device = out->device;
    n->dtype = out->dtype;
    n->ndim = out->ndim;
    memcpy(n->shape, out->shape, sizeof n->shape);
    n->checkpointed = out->device.checkpoint == CN_CHECKPOINT_BALANCED;
    n->memory_bound = ad_op_memory_bound(op);
    return n;
}

cn_tensor *ad_record(int op, cn_tensor *out, cn_tensor *const *in, int n_in, const int64_t *ints,
                     int n_ints, const double *reals, int n_reals) {
    if (!out || !out->device.autodiff || no_grad_depth > 0) return out;
    if (cn_dtype_kind(out->dtype) != CN_KIND_FLOAT) return out; /* int/bool: never tracked */
    int tracked = 0;
    for (int i = 0; i < n_in; i++) tracked |= in[i] && in[i]->autograd;
    if (!tracked) return out;

    if (n_ints > AD_MAX_INTS) { /* a bug of the op's front-end, never the user's */
        cn_set_error(CN_ERR_BACKEND, ad_op_name(op), "the op records %d ints, more than a node "
                     "keeps (%d); this is a bug in cinder: please report it", n_ints,
                     AD_MAX_INTS);
        cn_release(out);
        return NULL;
    }
    ad_node *n = ad_node_new(op, n_in, out);
    if (!n) goto fail;
    n->n_ints = n_ints;
    for (int i = 0; i < n_ints; i++) n->ints[i] = ints[i];
    n->n_reals = n_reals;
    for (int i = 0; i < n_reals; i++) n->reals[i] = reals[i];
    unsigned saves = ad_op_saves(op);
    /* checkpointed memory-bound nodes keep nothing they can recompute, but need every input
     * to replay their op */
    int recompute = n->checkpointed && n->memory_bound;
    for (int i = 0; i < n_in; i++) {
        ad_input *a = &n->in[i];
        cn_tensor *t = in[i];
        a->node = ad_node_retain(t->autograd);
        a->version = t->storage->version;
        a->storage = t->storage;
        a->dtype = t->dtype;
        a->ndim = t->ndim;
        memcpy(a->shape, t->shape, sizeof a->shape);
        int needed = (saves & (1u << i)) || recompute;
        if (needed && !(recompute && a->node)) {
            a->saved = ad_concrete(t);
            if (!a->saved) goto fail;
        }
    }
    int save_out = n->checkpointed ? !n->memory_bound : (saves & AD_SAVE_OUT) != 0;
    if (save_out) {
        n->saved_out = ad_concrete(out);
        if (!n->saved_out) goto fail;
        n->saved_out_version = out->storage->version;
    }
    out->autograd = n;
    return out;
fail:
    ad_node_release(n);
    cn_release(out);
    return NULL;
}

/* ---- leaves and wrappers ------------------------------------------------------------------- */

cn_tensor *cn_require_grad(cn_tensor *t) {
    const char *op = "require_grad";
    CN__CHECK_LIVE(op, t);
    if (!t) {
        cn__null_arg(op, "t");
        return NULL;
    }
    char buf[128];
    if (cn__dtype_kind(t->dtype) == CN_KIND_QUANTIZED) { /* never tracked (cinder/quant.h) */
        cn_set_error(CN_ERR_AUTODIFF_NONFLOAT, op, "only float tensors may use an autodiff "
                     "primitive: 't' is %s, quantized (a constant); track a float copy, e.g. "
                     "cn_require_grad(cn_dequantize(t, CN_F32))", cn_tensor_str(t, buf, sizeof buf));
        return NULL;
    }
    if (!t->device.autodiff) {
        cn_set_error(CN_ERR_AUTODIFF_DEVICE, op, "'t' is %s, on a concrete device, which records "
                     "no gradients; create it on cn_autodiff(device) or move it there with "
                     "cn_to_device", cn_tensor_str(t, buf, sizeof buf));
        return NULL;
    }
    if (cn__check_kind(op, "t", t, CN_KINDS_FLOAT) != CN_OK) return NULL;
    if (t->autograd) return t; /* already a leaf, or computed from one */
    ad_node *n = ad_node_new(AD_OP_LEAF, 0, t);
    if (!n) return NULL;
    n->saved_out = ad_concrete(t);
    if (!n->saved_out) {
        ad_node_release(n);
        return NULL;
    }
    n->saved_out_version = t->storage->version;
    t->autograd = n;
    return t;
}

int cn_requires_grad(const cn_tensor *t) { return t && t->autograd; }

cn_tensor *cn_retain_grad(cn_tensor *t) {
    if (!t) {
        cn__null_arg("retain_grad", "t");
        return NULL;
    }
    if (!t->autograd) {
        char buf[128];
        cn_set_error(CN_ERR_AUTODIFF_NO_GRAD, "retain_grad", "'t' %s is not tracked, so it will "
                     "have no gradient; compute it from a tensor marked with cn_require_grad",
                     cn_tensor_str(t, buf, sizeof buf));
        return NULL;
    }
    ((ad_node *)t->autograd)->retain_grad = 1;
    return t;
}

cn_status cn_set_grad_ready_hook(cn_tensor *t, cn_grad_ready_fn fn, void *ctx) {
    const char *op = "set_grad_ready_hook";
    CN__CHECK_LIVE(op, t);
    if (!t) {
        cn__null_arg(op, "t");
        return cn_last_status();
    }
    ad_node *n = t->autograd;
    if (!n || n->op != AD_OP_LEAF) {
        char buf[128];
        return cn_set_error(CN_ERR_AUTODIFF_NO_GRAD, op, "'t' %s is not a leaf that requires "
                            "grad (%s), so no final gradient of its own reaches a hook; mark it "
                            "with cn_require_grad first", cn_tensor_str(t, buf, sizeof buf),
                            n ? "it is computed from one" : "it is not tracked");
    }
    n->grad_ready = fn;
    n->grad_ready_ctx = fn ? ctx : NULL;
    return CN_OK;
}

/* ---- in-place ------------------------------------------------------------------------------ */

cn_status cn_copy_(cn_tensor *dst, cn_tensor *src) {
    const char *op = "copy_";
    if (!dst || !src) {
        cn__null_arg(op, !dst ? "dst" : "src");
        return cn_last_status();
    }
    char a[128], b[128];
    if (dst->autograd && no_grad_depth == 0)
        return cn_set_error(CN_ERR_AUTODIFF_INPLACE, op, "'dst' %s is tracked, and writing it in "
                            "place would corrupt its gradient; do the update between "
                            "cn_no_grad_begin() and cn_no_grad_end() (as optimizers do), or use "
                            "out-of-place ops", cn_tensor_str(dst, a, sizeof a));
    int64_t shape[CN_MAX_DIMS];
    int ndim;
    if (cn__broadcast_shapes(op, "dst", dst, "src", src, shape, &ndim) != CN_OK)
        return cn_last_status();
    if (ndim != dst->ndim || memcmp(shape, dst->shape, sizeof(int64_t) * (size_t)ndim) != 0)
        return cn_set_error(CN_ERR_SHAPE, op, "'src' %s does not broadcast to 'dst' %s without "
                            "growing it; reduce src first", cn_tensor_str(src, b, sizeof b),
                            cn_tensor_str(dst, a, sizeof a));
    return cn__copy_inplace(op, dst, src);
}
