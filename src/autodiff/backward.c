/* cn_backward: orders the graph behind the root, runs each node's formula from the root down,
 * accumulates gradients, and hands the leaves' (and retained) gradients back in a cn_grads. The
 * graph is consumed only when the whole backward has succeeded, so a failure loses nothing. */
#include <string.h>

#include "autodiff/autodiff_internal.h"
#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"

struct cn_grads {
    int count, cap;
    ad_node **keys;     /* references */
    cn_tensor **grads;  /* references, owned by no scope */
};

/* ---- the container ------------------------------------------------------------------------- */

static cn_status grads_put(cn_grads *g, ad_node *key, cn_tensor *grad) {
    if (g->count == g->cap) {
        int cap = g->cap ? g->cap * 2 : 16;
        ad_node **keys = cn__malloc("backward", sizeof *keys * (size_t)cap);
        cn_tensor **grads = cn__malloc("backward", sizeof *grads * (size_t)cap);
        if (!keys || !grads) {
            cn__free(keys);
            cn__free(grads);
            return CN_ERR_OUT_OF_MEMORY;
        }
        if (g->count) {
            memcpy(keys, g->keys, sizeof *keys * (size_t)g->count);
            memcpy(grads, g->grads, sizeof *grads * (size_t)g->count);
        }
        cn__free(g->keys);
        cn__free(g->grads);
        g->keys = keys;
        g->grads = grads;
        g->cap = cap;
    }
    /* each gradient gets dense memory of its own, so that writing one in place (clipping, an
     * optimizer) cannot change another that shares its storage or a broadcast source */
    int alone = cn_is_contiguous(grad) && cn__ref_count(&grad->storage->refcount) == 1;
    cn_tensor *own = alone ? cn_retain(grad) : cn_clone(grad);
    if (!own) return cn_last_status();
    cn__scope_forget(own);
    g->keys[g->count] = ad_node_retain(key);
    g->grads[g->count++] = own;
    return CN_OK;
}

void cn_grads_free(cn_grads *g) {
    if (!g) return;
    for (int i = 0; i < g->count; i++) {
        ad_node_release(g->keys[i]);
        cn_release(g->grads[i]);
    }
    cn__free(g->keys);
    cn__free(g->grads);
    cn__free(g);
}

static int grads_find(const cn_grads *g, const cn_tensor *t) {
    for (int i = 0; t && t->autograd && i < g->count; i++)
        if (g->keys[i] == t->autograd && g->grads[i]) return i;
    return -1;
}

cn_grads *cn_grads_new(void) { return cn__calloc("grads_new", 1, sizeof(cn_grads)); }

cn_status cn_grads_set(cn_grads *grads, const cn_tensor *t, cn_tensor *grad) {
    const char *op = "grads_set";
    CN__CHECK_LIVE(op, t);
    CN__CHECK_LIVE(op, grad);
    if (!grads || !t || !grad) {
        cn__null_arg(op, !grads ? "grads" : !t ? "t" : "grad");
        return cn_last_status();
    }
    char a[128], b[128], da[48], db[48];
    if (!t->autograd)
        return cn_set_error(CN_ERR_AUTODIFF_NO_GRAD, op, "'t' %s is not tracked, so no optimizer "
                            "looks for its gradient; mark it with cn_require_grad",
                            cn_tensor_str(t, a, sizeof a));
    if (cn_ndim(t) != cn_ndim(grad) ||
        memcmp(cn_shape(t), cn_shape(grad), sizeof(int64_t) * (size_t)cn_ndim(t)) != 0)
        return cn_set_error(CN_ERR_SHAPE, op, "'grad' %s must have the shape of 't' %s",
                            cn_tensor_str(grad, b, sizeof b), cn_tensor_str(t, a, sizeof a));
    if (cn_dtype_of(t) != cn_dtype_of(grad))
        return cn_set_error(CN_ERR_DTYPE, op, "'grad' %s must have the dtype of 't' %s; cast it",
                            cn_tensor_str(grad, b, sizeof b), cn_tensor_str(t, a, sizeof a));
    cn_device want = cn_inner_device(cn_device_of(t));
    if (!cn_device_eq(cn_inner_device(cn_device_of(grad)), want))
        return cn_set_error(CN_ERR_DEVICE_MISMATCH, op, "'grad' is on %s, but gradients of 't' "
                            "live on %s; move it with cn_to_device",
                            cn_device_str(cn_device_of(grad), db, sizeof db),
                            cn_device_str(want, da, sizeof da));
    int i = grads_find(grads, t);
    if (i < 0) {
        cn_tensor *plain = cn_inner(grad); /* untracked, on the concrete device */
        cn_status s = plain ? grads_put(grads, t->autograd, plain) : cn_last_status();
        cn_release(plain);
        return s;
    }
    cn_tensor *plain = cn_inner(grad);
    cn_tensor *own = plain ? cn_clone(plain) : NULL;
    cn_release(plain);
    if (!own) return cn_last_status();
    cn__scope_forget(own);
    cn_release(grads->grads[i]);
    grads->grads[i] = own;
    return CN_OK;
}

static void no_grad_error(const char *op, const cn_tensor *t) {
    char buf[128];
    cn_set_error(CN_ERR_AUTODIFF_NO_GRAD, op, "'t' %s has no gradient here: it is not tracked, or "
                 "not part of the graph behind the backward's root; mark leaves with "
                 "cn_require_grad and compute the root from them",
                 t ? cn_tensor_str(t, buf, sizeof buf) : "NULL");
}

cn_tensor *cn_grad(const cn_grads *grads, const cn_tensor *t) {
    if (!grads || !t) {
        cn__null_arg("grad", !grads ? "grads" : "t");
        return NULL;
    }
    int i = grads_find(grads, t);
    if (i < 0) {
        no_grad_error("grad", t);
        return NULL;
    }
    return grads->grads[i];
}

cn_tensor *cn_grad_find(const cn_grads *grads, const cn_tensor *t) {
    int i = grads && t ? grads_find(grads, t) : -1;
    return i < 0 ? NULL : grads->grads[i];
}

cn_tensor *cn_grad_remove(cn_grads *grads, const cn_tensor *t) {
    if (!grads || !t) {
        cn__null_arg("grad_remove", !grads ? "grads" : "t");
        return NULL;
    }
    int i = grads_find(grads, t);
    if (i < 0) {
        no_grad_error("grad_remove", t);
        return NULL;
    }
    cn_tensor *out = grads->grads[i];
    grads->grads[i] = NULL;
    return out;
}

/* ---- ordering ------------------------------------------------------------------------------ */

typedef struct node_list {
    ad_node **items;
    int64_t count, cap;
} node_list;

static cn_status list_push(node_list *l, ad_node *n) {
    if (l->count == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 64;
        ad_node **items = cn__malloc("backward", sizeof *items * (size_t)cap);
        if (!items) return CN_ERR_OUT_OF_MEMORY;
        if (l->count) memcpy(items, l->items, sizeof *items * (size_t)l->count);
        cn__free(l->items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->count++] = n;
    return CN_OK;
}

/* Post-order of the nodes reachable from root (inputs before the nodes that use them), by an
 * iterative depth-first walk, so that long chains do not exhaust the C stack. */
static cn_status topo_order(ad_node *root, node_list *order) {
    /* process-wide: a graph's leaves outlive a backward and may be walked next on another thread,
     * where a per-thread count could repeat the mark they were left with */
    static _Atomic uint64_t generation;
    uint64_t mark = atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed) + 1;
    node_list stack = {0};
    root->mark = mark;
    root->visit = 0;
    cn_status s = list_push(&stack, root);
    while (s == CN_OK && stack.count > 0) {
        ad_node *n = stack.items[stack.count - 1];
        ad_node *next = NULL;
        while (n->visit < n->n_in && !next) {
            ad_node *in = n->in[n->visit++].node;
            if (in && in->mark != mark) next = in;
        }
        if (next) {
            next->mark = mark;
            next->visit = 0;
            s = list_push(&stack, next);
        } else {
            stack.count--;
            s = list_push(order, n);
        }
    }
    cn__free(stack.items);
    return s;
}

/* Checks, before any work, that no value a formula needs was changed in place since it was
 * recorded, and that no node was consumed by an earlier backward. */
static cn_status check_graph(const node_list *order) {
    for (int64_t k = 0; k < order->count; k++) {
        ad_node *n = order->items[k];
        if (n->consumed)
            return cn_set_error(CN_ERR_AUTODIFF_GRAPH, "backward", "the graph through '%s' was "
                                "freed by an earlier cn_backward; run the forward pass again "
                                "before another backward", ad_node_name(n));
        for (int i = 0; i < n->n_in; i++) {
            const ad_input *a = &n->in[i];
            if (a->saved && a->saved->storage->version != a->version)
                return cn_set_error(CN_ERR_AUTODIFF_MODIFIED, "backward", "input %d of '%s' "
                                    "(a %s tensor) was modified in place after '%s' saved it for "
                                    "backward; its gradient would be wrong. Write into a copy, "
                                    "or modify it only after cn_backward", i, ad_node_name(n),
                                    cn_dtype_name(a->dtype), ad_node_name(n));
        }
        if (n->op != AD_OP_LEAF && n->saved_out &&
            n->saved_out->storage->version != n->saved_out_version)
            return cn_set_error(CN_ERR_AUTODIFF_MODIFIED, "backward", "the output of '%s' was "
                                "modified in place after it was saved for backward; write into "
                                "a copy instead", ad_node_name(n));
    }
    return CN_OK;
}

/* Adds g into node n's gradient (takes g's reference). */
static cn_status accumulate(ad_node *n, cn_tensor *g) {
    if (!n->grad) {
        n->grad = g;
        return CN_OK;
    }
    cn_tensor *sum = cn_add(n->grad, g);
    cn_release(g);
    if (!sum) return cn_last_status();
    cn_release(n->grad);
    n->grad = sum;
    return CN_OK;
}

static cn_status run_backward(const node_list *order, cn_grads *grads) {
    cn_status s = CN_OK;
    for (int64_t k = order->count - 1; k >= 0 && s == CN_OK; k--) {
        ad_node *n = order->items[k];
        if (!n->grad && !(n->ext && n->ext->reached)) continue;
        if (n->op == AD_OP_EXT_OUTPUT) { /* hands its gradient to the extension node */
            s = ad_ext_collect(n, n->grad);
            continue;
        }
        if (n->op == AD_OP_LEAF || n->retain_grad) s = grads_put(grads, n, n->grad);
        /* a leaf comes after every node that uses it in this order: its gradient is final */
        if (s == CN_OK && n->op == AD_OP_LEAF && n->grad_ready)
            s = n->grad_ready(grads->grads[grads->count - 1], n->grad_ready_ctx);
        if (s != CN_OK || n->op == AD_OP_LEAF) continue;
        cn_tensor **gin = cn__calloc("backward", (size_t)n->n_in, sizeof *gin);
        if (!gin) return CN_ERR_OUT_OF_MEMORY;
        s = n->op == AD_OP_EXT ? ad_ext_formula(n, n->grad, gin)
                               : ad_backward_formula(n, n->grad, gin);
        for (int i = 0; i < n->n_in; i++) {
            if (!gin[i]) continue;
            if (s == CN_OK && n->in[i].node)
                s = accumulate(n->in[i].node, gin[i]);
            else
                cn_release(gin[i]);
        }
        cn__free(gin);
    }
    return s;
}

cn_grads *cn_backward(cn_tensor *root) {
    const char *op = "backward";
    CN__CHECK_LIVE(op, root);
    if (!root) {
        cn__null_arg(op, "root");
        return NULL;
    }
    if (!root->autograd) {
        char buf[128];
        cn_set_error(CN_ERR_AUTODIFF_NO_GRAD, op, "'root' %s does not require grad, so there is "
                     "nothing to differentiate; compute it from a leaf marked with "
                     "cn_require_grad on an autodiff device (and not under no-grad mode)",
                     cn_tensor_str(root, buf, sizeof buf));
        return NULL;
    }
    ad_node *r = root->autograd;
    node_list order = {0};
    cn_grads *grads = NULL;
    cn_status s = topo_order(r, &order);
    if (s == CN_OK) s = check_graph(&order);
    if (s == CN_OK) {
        grads = cn__calloc(op, 1, sizeof *grads);
        if (!grads) s = CN_ERR_OUT_OF_MEMORY;
    }
    /* Everything the formulas make lives in this scope; what must outlive it (the gradients in
     * the container) is taken out of it by grads_put. Gradients and recomputed values still on
     * the nodes are released before the scope ends, which then frees the rest. */
    int scoped = s == CN_OK && cn_scope_begin() == CN_OK;
    if (s == CN_OK && !scoped) s = CN_ERR_OUT_OF_MEMORY;
    if (s == CN_OK) {
        r->grad = cn_ones(r->shape, r->ndim, r->dtype, cn_inner_device(r->device));
        if (!r->grad) s = cn_last_status();
    }
    if (s == CN_OK) {
        cn_no_grad_begin();
        s = run_backward(&order, grads);
        cn_no_grad_end();
    }
    for (int64_t k = 0; k < order.count; k++) {
        ad_node *n = order.items[k];
        ad_node_retain(n); /* consumption below may drop the last other reference */
        cn_release(n->grad);
        cn_release(n->value);
        n->grad = n->value = NULL;
        ad_ext_reset(n);
    }
    if (scoped) cn_scope_end();
    if (s == CN_OK) {
        for (int64_t k = 0; k < order.count; k++) {
            ad_node *n = order.items[k];
            if (n->op == AD_OP_LEAF) continue;
            for (int i = 0; i < n->n_in; i++) {
                cn_release(n->in[i].saved);
                ad_node_release(n->in[i].node);
                n->in[i].saved = NULL;
                n->in[i].node = NULL;
            }
            cn_release(n->saved_out);
            n->saved_out = NULL;
            ad_ext_consume(n);
            n->consumed = 1;
        }
    }
    for (int64_t k = 0; k < order.count; k++) ad_node_release(order.items[k]);
    cn__free(order.items);
    if (s != CN_OK) {
        cn_grads_free(grads);
        return NULL;
    }
    return grads;
}
