/* Extension ops in the graph. One node per call holds the inputs' edges and the values the
 * user's backward reads; a multi-output op gives each float output a selector node that hands
 * its gradient to the call's node, so the backward sees every output's gradient at once.
 *
 * The extension layer sits above this one: it hands in, when it records a call, the op's schema,
 * the user's backward and a replay of the concrete kernel (checkpointing). This file reads only
 * those, through the public types of cinder/extension.h. */
#include <string.h>

#include "autodiff/autodiff_internal.h"
#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"

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

static ad_ext *ext_new(const cn_ext_op *op, const cn_ext_schema *s, cn_ext_backward_fn backward,
                       ad_ext_replay_fn replay, const int *tags, const int64_t *ints,
                       const double *reals) {
    const char *name = s->name;
    ad_ext *e = cn__calloc(name, 1, sizeof *e);
    if (!e) return NULL;
    e->op = op;
    e->schema = s;
    e->backward = backward;
    e->replay = replay;
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

cn_status ad_ext_record(const cn_ext_op *op, const cn_ext_schema *s,
                        cn_ext_backward_fn backward, ad_ext_replay_fn replay,
                        cn_tensor *const *in, const int *tags, const int64_t *ints,
                        const double *reals, cn_tensor **outputs) {
    int n_float = 0;
    for (int k = 0; k < s->n_outputs; k++)
        n_float += cn_dtype_kind(outputs[k]->dtype) == CN_KIND_FLOAT;
    if (n_float == 0) return CN_OK; /* int/bool outputs are never tracked */

    ad_node *n = ad_node_new(AD_OP_EXT, s->n_tensors, outputs[0]);
    if (!n || !(n->ext = ext_new(op, s, backward, replay, tags, ints, reals))) goto fail;
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
    const char *name = e->schema->name;
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
    if (ok && e->replay(e->op, vals, e->tags, e->ints, e->reals, e->values) == CN_OK)
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

/* The ownership rule of a backward's results (extension.h): each grad_in entry hands one
 * reference to cinder. A tensor the backward made is handed over as it is (taken out of the scope
 * the backward runs in); a tensor it was given (an input value, an output, a grad_out) must be
 * cn_retain-ed once per entry. The counts say which happened: `given` lists the tensors passed to
 * the backward with their reference counts just before the call. On success every entry holds
 * one reference of cinder's; otherwise (the backward failed, or broke the rule) the error is set,
 * the references the backward meant to hand over are dropped and every entry is NULL. */
typedef struct given_ref {
    const cn_tensor *t;
    int64_t refs;
} given_ref;

static int64_t refs_before(const given_ref *given, int n_given, const cn_tensor *t) {
    for (int i = 0; i < n_given; i++)
        if (given[i].t == t) return given[i].refs;
    return -1;
}

static cn_status take_results(const ad_node *n, const given_ref *given, int n_given,
                              cn_tensor **gin, cn_status st) {
    const cn_ext_schema *s = n->ext->schema;
    const char *name = s->name;
    char buf[128];
    for (int pass = 0; pass < 2; pass++) /* 0: check the counts; 1: take or drop */
        for (int j = 0; j < n->n_in; j++) {
            cn_tensor *t = gin[j];
            int first = 1, k = 0;
            for (int i = 0; t && i < n->n_in; i++) {
                if (gin[i] == t && i < j) first = 0;
                k += gin[i] == t;
            }
            if (!t || !first) continue;
            CN__CHECK_LIVE(name, t); /* debug builds: a result released before it was returned */
            int64_t rc = cn__ref_count(&t->refcount), before = refs_before(given, n_given, t);
            int made = before < 0 && t->scope_slot >= 0;
            const char *in = s->tensors[j].name;
            if (pass == 0 && st == CN_OK && made && rc > k)
                st = cn_set_error(CN_ERR_INVALID_ARG, name, "the backward of '%s' returned %s, a "
                                  "tensor it made, as the gradient of '%s' with %lld reference(s) "
                                  "more than it hands over (a cn_retain on it); a tensor the "
                                  "backward makes is handed over as it is, so write it into "
                                  "grad_in without cn_retain", name,
                                  cn_tensor_str(t, buf, sizeof buf), in, (long long)(rc - k));
            else if (pass == 0 && st == CN_OK && made && rc < k)
                st = cn_set_error(CN_ERR_INVALID_ARG, name, "the backward of '%s' wrote %s into "
                                  "grad_in for %d inputs ('%s' first) but holds %lld reference(s) "
                                  "to it; each grad_in entry hands over one reference, so "
                                  "cn_retain the tensor for every entry after the first", name,
                                  cn_tensor_str(t, buf, sizeof buf), k, in, (long long)rc);
            else if (pass == 0 && st == CN_OK && before >= 0 && rc < before + k)
                st = cn_set_error(CN_ERR_INVALID_ARG, name, "the backward of '%s' returned %s, a "
                                  "tensor it was given (an input, an output or a grad_out), as "
                                  "the gradient of '%s' without a reference of its own; each "
                                  "grad_in entry hands one reference to cinder, so write "
                                  "cn_retain(t) for a tensor you were given", name,
                                  cn_tensor_str(t, buf, sizeof buf), in);
            else if (pass == 0 && st == CN_OK && before >= 0 && rc > before + k)
                st = cn_set_error(CN_ERR_INVALID_ARG, name, "the backward of '%s' returned %s as "
                                  "the gradient of '%s' and took %lld more reference(s) to it than "
                                  "it hands over; cn_retain a tensor you were given once per "
                                  "grad_in entry and release any other reference you take", name,
                                  cn_tensor_str(t, buf, sizeof buf), in,
                                  (long long)(rc - before - k));
            if (pass == 0) continue;
            if (st == CN_OK) {
                if (made) cn__scope_forget(t); /* the scope's reference becomes cinder's */
                continue;
            }
            /* drop what was handed over; a made tensor's last reference goes with the scope */
            int64_t drop = made ? rc - 1 : before >= 0 ? rc - before : k;
            if (drop > k) drop = k;
            for (int64_t d = 0; d < drop; d++) cn_release(t);
        }
    if (st != CN_OK)
        for (int j = 0; j < n->n_in; j++) gin[j] = NULL;
    return st;
}

/* A gradient must match its input: shape, dtype, and the input's concrete device. */
static cn_status check_gradient(const ad_node *n, int j, const cn_tensor *g, const cn_tensor *v) {
    const cn_ext_schema *s = n->ext->schema;
    const ad_input *a = &n->in[j];
    char buf[128], dev[64];
    cn_tensor_str(g, buf, sizeof buf);
    if (cn_ndim(g) != a->ndim ||
        memcmp(cn_shape(g), a->shape, sizeof(int64_t) * (size_t)a->ndim) != 0) {
        char want[96];
        return cn_set_error(CN_ERR_SHAPE, s->name, "the backward of '%s' returned %s as the "
                            "gradient of '%s', whose shape is %s; return a gradient shaped like "
                            "the input (reduce a broadcast gradient with cn_sum_dim)", s->name,
                            buf, s->tensors[j].name,
                            cn__shape_str(a->shape, a->ndim, want, sizeof want));
    }
    if (cn_dtype_of(g) != a->dtype)
        return cn_set_error(CN_ERR_DTYPE, s->name, "the backward of '%s' returned %s as the "
                            "gradient of '%s', which is %s; return a gradient of the input's "
                            "dtype (compute it from the backward's arguments, or cn_cast it)",
                            s->name, buf, s->tensors[j].name, cn_dtype_name(a->dtype));
    cn_device want = cn_device_of(v), got = cn_device_of(g);
    if (got.autodiff || got.backend != want.backend || got.index != want.index)
        return cn_set_error(CN_ERR_DEVICE_MISMATCH, s->name, "the backward of '%s' returned %s "
                            "as the gradient of '%s', which lives on %s; a gradient lives on the "
                            "input's concrete device (the backward's arguments are there, and it "
                            "runs in no-grad mode): make it from them, or move it with "
                            "cn_to_device", s->name, buf, s->tensors[j].name,
                            cn_device_str(want, dev, sizeof dev));
    return CN_OK;
}

cn_status ad_ext_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    ad_ext *e = n->ext;
    const cn_ext_schema *s = e->schema;
    cn_tensor *small_in[8], *small_out[8], *small_g[8];
    given_ref small_given[24];
    int big = n->n_in > 8 || e->n_out > 8;
    int n_given_max = n->n_in + 2 * e->n_out;
    cn_tensor **vin = big ? cn__calloc(s->name, (size_t)n->n_in + 1, sizeof *vin) : small_in;
    cn_tensor **vout = big ? cn__calloc(s->name, (size_t)e->n_out, sizeof *vout) : small_out;
    cn_tensor **gout = big ? cn__calloc(s->name, (size_t)e->n_out, sizeof *gout) : small_g;
    given_ref *given = big ? cn__calloc(s->name, (size_t)n_given_max, sizeof *given)
                           : small_given;
    cn_status st = vin && vout && gout && given ? CN_OK : CN_ERR_OUT_OF_MEMORY;
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
        int n_given = 0;
        for (int j = 0; j < n->n_in; j++) {
            gin[j] = NULL;
            needs[j] = n->in[j].node != NULL; /* only tracked inputs take a gradient */
            if (vin[j]) given[n_given++] = (given_ref){vin[j], cn__ref_count(&vin[j]->refcount)};
        }
        for (int k = 0; k < e->n_out; k++) {
            given[n_given++] = (given_ref){vout[k], cn__ref_count(&vout[k]->refcount)};
            given[n_given++] = (given_ref){gout[k], cn__ref_count(&gout[k]->refcount)};
        }
        st = e->backward(vin, needs, n->n_in, vout, gout, e->n_out, e->ints, e->reals, gin);
        if (st != CN_OK && cn_last_status() == CN_OK)
            cn_set_error(st, s->name, "the backward of '%s' failed without a message", s->name);
        st = take_results(n, given, n_given, gin, st);
    }
    for (int j = 0; st == CN_OK && j < n->n_in; j++) {
        if (!gin[j]) continue;
        if (!n->in[j].node) { /* a constant or an int input: no gradient needed */
            cn_release(gin[j]);
            gin[j] = NULL;
            continue;
        }
        st = check_gradient(n, j, gin[j], vin[j]);
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
        cn__free(given);
    }
    return st;
}

const char *ad_node_name(const ad_node *n) {
    if (n->op == AD_OP_EXT) return n->ext->schema->name;
    if (n->op == AD_OP_EXT_OUTPUT) return n->in[0].node->ext->schema->name;
    return ad_op_name(n->op);
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
