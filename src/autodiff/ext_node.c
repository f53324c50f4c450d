/* Extension ops in the graph. One node per call holds the inputs' edges and the values the
 * user's backward reads; a multi-output op gives each float output a selector node that hands
 * its gradient to the call's node, so the backward sees every output's gradient at once. */
#include <string.h>

#include "autodiff/autodiff_internal.h"
#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "extension/extension_internal.h"

void ad_ext_free(ad_ext *e) {
    if (!e) return;
    for (int k = 0; k < e->n_out; k++) {
        if (e->saved_out) cn_release(e->saved_out[k]);
        if (e->values) cn_release(e->values[k]);
        if (e->grad_out) cn_release(e->grad_out[k]);
    }
    cn__free(e->tags);
    cn__free(e->ints);
    cn__free(e->reals);
    cn__free(e->saved_out);
    cn__free(e->saved_version);
    cn__free(e->values);
    cn__free(e->grad_out);
    cn__free(e);
}

static ad_ext *ext_new(const cn_ext_op *op, const int *tags, const int64_t *ints,
                       const double *reals) {
    const cn_ext_schema *s = &op->schema;
    const char *name = s->name;
    ad_ext *e = cn__calloc(name, 1, sizeof *e);
    if (!e) return NULL;
    e->op = op;
    e->n_out = s->n_outputs;
    size_t n_out = (size_t)s->n_outputs;
    int ok = (e->saved_out = cn__calloc(name, n_out, sizeof *e->saved_out)) &&
             (e->saved_version = cn__calloc(name, n_out, sizeof *e->saved_version)) &&
             (e->values = cn__calloc(name, n_out, sizeof *e->values)) &&
             (e->grad_out = cn__calloc(name, n_out, sizeof *e->grad_out));
    if (ok && s->n_groups && (ok = (e->tags = cn__calloc(name, (size_t)s->n_groups,
                                                        sizeof *e->tags)) != NULL))
        for (int g = 0; g < s->n_groups; g++) e->tags[g] = tags ? tags[g] : 0;
    if (ok && s->n_ints && (ok = (e->ints = cn__calloc(name, (size_t)s->n_ints,
                                                      sizeof *e->ints)) != NULL))
        memcpy(e->ints, ints, sizeof *e->ints * (size_t)s->n_ints);
    if (ok && s->n_reals && (ok = (e->reals = cn__calloc(name, (size_t)s->n_reals,
                                                        sizeof *e->reals)) != NULL))
        memcpy(e->reals, reals, sizeof *e->reals * (size_t)s->n_reals);
    if (!ok) {
        ad_ext_free(e);
        return NULL;
    }
    return e;
}

static void drop_outputs(cn_tensor **outputs, int n) {
    for (int k = 0; k < n; k++) {
        cn_release(outputs[k]);
        outputs[k] = NULL;
    }
}

cn_status ad_ext_record(const cn_ext_op *op, cn_tensor *const *in, const int *tags,
                        const int64_t *ints, const double *reals, cn_tensor **outputs) {
    const cn_ext_schema *s = &op->schema;
    int n_float = 0;
    for (int k = 0; k < s->n_outputs; k++)
        n_float += cn_dtype_kind(outputs[k]->dtype) == CN_KIND_FLOAT;
    if (n_float == 0) return CN_OK; /* int/bool outputs are never tracked */

    ad_node *n = ad_node_new(AD_OP_EXT, s->n_tensors, outputs[0]);
    if (!n || !(n->ext = ext_new(op, tags, ints, reals))) goto fail;
    n->memory_bound = (s->flags & CN_EXT_MEMORY_BOUND) != 0;
    int recompute = n->checkpointed && n->memory_bound;
    for (int j = 0; j < s->n_tensors; j++) {
        ad_input *a = &n->in[j];
        if (!in[j]) {
            a->ndim = -1;
            continue;
        }
        a->node = ad_node_retain(in[j]->autograd);
        a->version = in[j]->storage->version;
        a->storage = in[j]->storage;
        a->dtype = in[j]->dtype;
        a->ndim = in[j]->ndim;
        memcpy(a->shape, in[j]->shape, sizeof a->shape);
        if (!(recompute && a->node) && !(a->saved = ad_concrete(in[j]))) goto fail;
    }
    for (int k = 0; k < s->n_outputs && !recompute; k++) {
        if (!(n->ext->saved_out[k] = ad_concrete(outputs[k]))) goto fail;
        n->ext->saved_version[k] = outputs[k]->storage->version;
    }
    if (s->n_outputs == 1) {
        outputs[0]->autograd = n;
        return CN_OK;
    }
    /* several outputs: a selector node per float output; they hold the call's node */
    ad_node *selectors[64] = {0};
    if (s->n_outputs > 64) {
        cn_set_error(CN_ERR_INVALID_ARG, s->name, "%d outputs; differentiable extension ops have "
                     "at most 64", s->n_outputs);
        goto fail;
    }
    for (int k = 0; k < s->n_outputs; k++) {
        if (cn_dtype_kind(outputs[k]->dtype) != CN_KIND_FLOAT) continue;
        ad_node *sel = ad_node_new(AD_OP_EXT_OUTPUT, 1, outputs[k]);
        if (!sel) {
            for (int j = 0; j < k; j++) ad_node_release(selectors[j]);
            goto fail;
        }
        sel->in[0].node = ad_node_retain(n);
        sel->in[0].ndim = -1;
        sel->ints[0] = k;
        sel->n_ints = 1;
        selectors[k] = sel;
    }
    for (int k = 0; k < s->n_outputs; k++)
        if (selectors[k]) outputs[k]->autograd = selectors[k];
    ad_node_release(n); /* the selectors keep it */
    return CN_OK;
fail:
    ad_node_release(n);
    drop_outputs(outputs, s->n_outputs);
    return cn_last_status() != CN_OK ? cn_last_status() : CN_ERR_OUT_OF_MEMORY;
}

/* ---- values -------------------------------------------------------------------------------- */

cn_tensor *ad_ext_output_value(ad_node *n, int i) {
    ad_ext *e = n->ext;
    const char *name = e->op->schema.name;
    if (e->saved_out[i]) {
        if (e->saved_out[i]->storage->version != e->saved_version[i]) {
            cn_set_error(CN_ERR_AUTODIFF_MODIFIED, "backward", "output %d of '%s' was modified in "
                         "place after it was saved; write into a copy instead", i, name);
            return NULL;
        }
        return e->saved_out[i];
    }
    if (e->values[i]) return e->values[i];
    /* checkpointed: run the op again on its inputs' values, on the concrete route */
    cn_tensor *small[8];
    cn_tensor **vals = n->n_in <= 8 ? small : cn__calloc(name, (size_t)n->n_in, sizeof *vals);
    if (!vals) return NULL;
    int ok = 1;
    for (int j = 0; j < n->n_in && ok; j++) {
        vals[j] = n->in[j].ndim < 0 ? NULL : ad_input_value(n, j);
        ok = n->in[j].ndim < 0 || vals[j];
    }
    if (ok && cn_ext_call(e->op, CN_EXT_ROUTE_CONCRETE, vals, e->tags, e->ints, e->reals,
                          e->values) == CN_OK)
        for (int k = 0; k < e->n_out; k++) cn__scope_forget(e->values[k]);
    if (vals != small) cn__free(vals);
    return e->values[i];
}

/* ---- backward ------------------------------------------------------------------------------ */

cn_status ad_ext_collect(ad_node *sel, cn_tensor *g) {
    ad_node *n = sel->in[0].node;
    int k = (int)sel->ints[0];
    ad_ext *e = n->ext;
    e->reached = 1;
    if (!e->grad_out[k]) {
        e->grad_out[k] = cn_retain(g);
        return CN_OK;
    }
    cn_tensor *sum = cn_add(e->grad_out[k], g);
    if (!sum) return cn_last_status();
    cn_release(e->grad_out[k]);
    e->grad_out[k] = sum;
    return CN_OK;
}

cn_status ad_ext_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    ad_ext *e = n->ext;
    const cn_ext_schema *s = &e->op->schema;
    cn_tensor *small_in[8], *small_out[8], *small_g[8];
    int big = n->n_in > 8 || e->n_out > 8;
    cn_tensor **vin = big ? cn__calloc(s->name, (size_t)n->n_in + 1, sizeof *vin) : small_in;
    cn_tensor **vout = big ? cn__calloc(s->name, (size_t)e->n_out, sizeof *vout) : small_out;
    cn_tensor **gout = big ? cn__calloc(s->name, (size_t)e->n_out, sizeof *gout) : small_g;
    cn_status st = vin && vout && gout ? CN_OK : CN_ERR_OUT_OF_MEMORY;
    if (st == CN_OK && cn_scope_begin() != CN_OK) st = cn_last_status();
    int scoped = st == CN_OK;
    for (int j = 0; st == CN_OK && j < n->n_in; j++) {
        vin[j] = n->in[j].ndim < 0 ? NULL : ad_input_value(n, j);
        if (n->in[j].ndim >= 0 && !vin[j]) st = cn_last_status();
    }
    for (int k = 0; st == CN_OK && k < e->n_out; k++) {
        vout[k] = ad_ext_output_value(n, k);
        cn_tensor *gk = e->n_out == 1 ? g : e->grad_out[k];
        if (!gk && vout[k]) /* an output nothing depended on: its gradient is zero */
            gk = cn_zeros(cn_shape(vout[k]), cn_ndim(vout[k]), cn_dtype_of(vout[k]),
                          cn_device_of(vout[k]));
        gout[k] = gk;
        if (!vout[k] || !gk) st = cn_last_status();
    }
    int small_needs[8];
    int *needs = n->n_in <= 8 ? small_needs : cn__calloc(s->name, (size_t)n->n_in, sizeof *needs);
    if (st == CN_OK && !needs) st = CN_ERR_OUT_OF_MEMORY;
    if (st == CN_OK) {
        for (int j = 0; j < n->n_in; j++) {
            gin[j] = NULL;
            needs[j] = n->in[j].node != NULL; /* only tracked inputs take a gradient */
        }
        st = e->op->backward(vin, needs, n->n_in, vout, gout, e->n_out, e->ints, e->reals, gin);
        /* the user's new references may have been made in our scope: take them out of it */
        for (int j = 0; j < n->n_in; j++)
            if (gin[j]) cn__scope_forget(gin[j]);
        if (st != CN_OK && cn_last_status() == CN_OK)
            cn_set_error(st, s->name, "the backward of '%s' failed without a message", s->name);
    }
    char buf[128];
    for (int j = 0; st == CN_OK && j < n->n_in; j++) {
        if (!gin[j]) continue;
        if (!n->in[j].node) { /* a constant or an int input: no gradient needed */
            cn_release(gin[j]);
            gin[j] = NULL;
            continue;
        }
        if (cn_ndim(gin[j]) != n->in[j].ndim ||
            memcmp(cn_shape(gin[j]), n->in[j].shape, sizeof(int64_t) * (size_t)n->in[j].ndim))
            st = cn_set_error(CN_ERR_SHAPE, s->name, "the backward of '%s' returned %s as the "
                              "gradient of '%s', whose shape differs from the input's; return a "
                              "gradient shaped like the input", s->name,
                              cn_tensor_str(gin[j], buf, sizeof buf), s->tensors[j].name);
    }
    if (needs && needs != small_needs) cn__free(needs);
    if (scoped) cn_scope_end();
    if (st != CN_OK)
        for (int j = 0; j < n->n_in; j++) {
            cn_release(gin[j]);
            gin[j] = NULL;
        }
    if (big) {
        cn__free(vin);
        cn__free(vout);
        cn__free(gout);
    }
    return st;
}

void ad_ext_reset(ad_node *n) {
    if (!n->ext) return;
    for (int k = 0; k < n->ext->n_out; k++) {
        cn_release(n->ext->values[k]);
        cn_release(n->ext->grad_out[k]);
        n->ext->values[k] = n->ext->grad_out[k] = NULL;
    }
    n->ext->reached = 0;
}

void ad_ext_consume(ad_node *n) {
    if (!n->ext) return;
    for (int k = 0; k < n->ext->n_out; k++) {
        cn_release(n->ext->saved_out[k]);
        n->ext->saved_out[k] = NULL;
    }
}
