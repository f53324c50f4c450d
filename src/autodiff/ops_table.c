/* What the graph needs to know of each op, read from the op table (core/op_table.h): its name,
 * whether it is memory-bound, which values its backward reads, and how to run it again
 * (checkpointing). */
#include "autodiff/autodiff_internal.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/router.h"

const char *ad_op_name(int op) {
    const cn__op_decl *d = cn__op_decl_of(op);
    if (d) return d->name;
    if (op == AD_OP_LEAF) return "leaf";
    if (op == AD_OP_EXT) return "extension";
    if (op == AD_OP_EXT_OUTPUT) return "extension output";
    return "unknown";
}

int ad_op_memory_bound(int op) {
    const cn__op_decl *d = cn__op_decl_of(op);
    return d && d->memory_bound;
}

unsigned ad_op_saves(int op) {
    const cn__op_decl *d = cn__op_decl_of(op);
    return d ? d->saves : 0;
}

/* ---- replay -------------------------------------------------------------------------------- */

/* Only memory-bound ops are replayed: the elementwise ones through the router's one elementwise
 * front-end, with the attributes the node recorded; the views from the geometry it recorded. */
cn_tensor *ad_replay(ad_node *n, cn_tensor *const *v) {
    const int64_t *k = n->ints;
    const cn__op_decl *d = cn__op_decl_of(n->op);
    if (d && d->memory_bound && d->family != CN__FAMILY_VIEW) {
        if (n->op == CN_OP_COPY) return cn_contiguous(v[0]);
        return cn__elementwise((cn_op)n->op, v, n->ints, n->reals, n->dtype);
    }
    switch (n->op) {
    case CN__OP_TRANSPOSE: return cn_transpose(v[0], (int)k[0], (int)k[1]);
    case CN__OP_PERMUTE: {
        int perm[CN_MAX_DIMS];
        for (int i = 0; i < n->n_ints; i++) perm[i] = (int)k[i];
        return cn_permute(v[0], perm);
    }
    case CN__OP_SLICE: return cn_slice(v[0], (int)k[0], k[1], k[1] + k[2] * n->shape[k[0]], k[2]);
    case CN__OP_VIEW: return cn_reshape(v[0], n->shape, n->ndim);
    case CN__OP_EXPAND: return cn_expand(v[0], n->shape, n->ndim);
    default:
        cn_set_error(CN_ERR_BACKEND, "backward", "'%s' cannot be recomputed for checkpointing; "
                     "this is a bug in cinder: please report it", ad_op_name(n->op));
        return NULL;
    }
}
