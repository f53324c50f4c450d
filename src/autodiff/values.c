/* Values a backward formula reads: saved ones, or, under checkpointing, recomputed ones. */
#include "autodiff/autodiff_internal.h"
#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"

static cn_tensor *modified(ad_node *n, int i) {
    cn_set_error(CN_ERR_AUTODIFF_MODIFIED, "backward", "input %d of '%s' was modified in place "
                 "after it was recorded; its gradient would be wrong. Write into a copy, or modify "
                 "it only after cn_backward", i, ad_node_name(n));
    return NULL;
}

cn_tensor *ad_output_value(ad_node *n) {
    if (n->op == AD_OP_EXT) return ad_ext_output_value(n, 0);
    if (n->op == AD_OP_EXT_OUTPUT) return ad_ext_output_value(n->in[0].node, (int)n->ints[0]);
    if (n->saved_out) {
        if (n->op != AD_OP_LEAF && n->saved_out->storage->version != n->saved_out_version) {
            cn_set_error(CN_ERR_AUTODIFF_MODIFIED, "backward", "the output of '%s' was modified "
                         "in place after it was saved; write into a copy instead",
                         ad_node_name(n));
            return NULL;
        }
        return n->saved_out;
    }
    if (n->value) return n->value;
    /* checkpointed: replay the op on its inputs' values, recomputed in turn if need be */
    cn_tensor *stack_values[4];
    cn_tensor **values = n->n_in <= 4 ? stack_values : cn__calloc("backward", (size_t)n->n_in, sizeof *values);
    if (!values) return NULL;
    int ok = 1;
    for (int i = 0; i < n->n_in && ok; i++) {
        values[i] = ad_input_value(n, i);
        ok = values[i] != NULL;
    }
    if (ok) n->value = ad_replay(n, values);
    if (n->value) cn__scope_forget(n->value); /* the node owns it until the backward ends */
    if (values != stack_values) cn__free(values);
    return ok ? n->value : NULL;
}

cn_tensor *ad_input_value(ad_node *n, int i) {
    ad_input *a = &n->in[i];
    if (a->saved) return a->saved->storage->version == a->version ? a->saved : modified(n, i);
    if (!a->node) {
        cn_set_error(CN_ERR_AUTODIFF_GRAPH, "backward", "input %d of '%s' was not kept for "
                     "backward (the graph was freed); run the forward pass again", i,
                     ad_node_name(n));
        return NULL;
    }
    cn_tensor *v = ad_output_value(a->node);
    if (v && v->storage == a->storage && v->storage->version != a->version) return modified(n, i);
    return v;
}
