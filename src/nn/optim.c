/* Optimizers: SGD (momentum, Nesterov, weight decay) and AdamW, with PyTorch's update rules.
 * Every step works on the concrete tensors under the parameters, under no-grad mode, and checks
 * and prepares everything before it writes the first parameter:
 * - SGD runs the backend's fused sgd_step kernel (cn_sgd_step_, cinder/ops.h): one pass per
 *   parameter that updates the parameter and its momentum buffer in place. A backend without that
 *   kernel (a program's own) gets the composed rule below instead, computed first and then
 *   written with cn_copy_.
 * - AdamW likewise runs the fused adamw_step kernel (cn_adamw_step_) where the backend has it, and
 *   otherwise computes every new value with composed ops, then writes them with cn_copy_.
 * State tensors (momentum buffers, Adam's moments) are concrete and owned by no scope: only the
 * optimizer frees them. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

typedef enum opt_kind { OPT_SGD, OPT_ADAMW } opt_kind;

struct cn_optimizer {
    opt_kind kind;
    double lr, momentum, dampening, weight_decay; /* SGD; lr and weight_decay also AdamW */
    int nesterov;
    double beta1, beta2, eps; /* AdamW */
    int n;
    cn_tensor **params; /* references */
    cn_tensor **state1; /* SGD: momentum buffer; AdamW: exp_avg (NULL until the first step) */
    cn_tensor **state2; /* AdamW: exp_avg_sq */
    int64_t *steps;     /* the steps in which each parameter had a gradient */
    double *lr_scale;   /* each parameter's group's lr / lr at construction (1: no groups) */
    double *wd;         /* each parameter's group's weight decay */
    char **names;       /* each parameter's name (given, or its index): state names */
    /* what cn_optimizer_state handed out last: names and references owned here, released by
     * the next call, a step, a load or cn_optimizer_free */
    cn_param *view;
    int view_count;
};

/* ---- construction ---------------------------------------------------------------------------- */

static char *copy_string(const char *op, const char *s) {
    size_t len = strlen(s);
    char *c = cn__malloc(op, len + 1);
    if (c) memcpy(c, s, len + 1);
    return c;
}

static void view_clear(cn_optimizer *o);

/* The learning rate and weight decay of parameter i (its group's). */
static double lr_of(const cn_optimizer *o, int i) { return o->lr * o->lr_scale[i]; }
static double wd_of(const cn_optimizer *o, int i) { return o->wd[i]; }

/* Checks one group's lr or weight decay (CN_GROUP_DEFAULT, or >= 0). */
static int group_value_ok(double v) { return v == CN_GROUP_DEFAULT || v >= 0; }

static cn_optimizer *optimizer_new(const char *op, opt_kind kind, const cn_param_group *groups,
                                   int n_groups, double lr, double weight_decay) {
    if (!groups) {
        cn__null_arg(op, "groups");
        return NULL;
    }
    if (!(lr >= 0) || !(weight_decay >= 0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "lr = %g, weight_decay = %g; both must be >= 0", lr,
                     weight_decay);
        return NULL;
    }
    int n = 0;
    for (int gi = 0; gi < n_groups; gi++) {
        const cn_param_group *g = &groups[gi];
        if (!g->params) {
            cn__null_arg(op, "groups[i].params");
            return NULL;
        }
        if (g->n < 0 || n > INT_MAX - g->n) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "group %d has n = %d parameters; give 0 or more "
                         "(and fewer than INT_MAX in all)", gi, g->n);
            return NULL;
        }
        if (!group_value_ok(g->lr) || !group_value_ok(g->weight_decay)) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "group %d: lr = %g, weight_decay = %g; each must "
                         "be >= 0, or CN_GROUP_DEFAULT for the optimizer's", gi, g->lr,
                         g->weight_decay);
            return NULL;
        }
        if (g->lr != CN_GROUP_DEFAULT && g->lr != 0 && lr == 0) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "group %d has lr = %g but the optimizer's lr is "
                         "0; groups follow the optimizer's lr in proportion (set_lr scales them "
                         "all), so give it a positive lr", gi, g->lr);
            return NULL;
        }
        n += g->n;
    }
    if (n < 1) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "%d parameters; an optimizer needs at least one", n);
        return NULL;
    }
    /* the parameters in group order, each with its group's settings */
    const cn_param **all = cn__calloc(op, (size_t)n, sizeof *all);
    if (!all) return NULL;
    for (int gi = 0, k = 0; gi < n_groups; gi++)
        for (int j = 0; j < groups[gi].n; j++) all[k++] = &groups[gi].params[j];
    cn_optimizer *o = NULL;
    for (int i = 0; i < n; i++) {
        const char *name = all[i]->name ? all[i]->name : "(unnamed)";
        if (!all[i]->tensor) {
            cn__null_arg(op, "params[i].tensor");
            goto done;
        }
        if (cn_kind_of(all[i]->tensor) != CN_KIND_FLOAT) {
            char buf[128];
            cn_set_error(CN_ERR_KIND, op,
                         "parameter %d ('%s') is %s; optimizers update float "
                         "tensors",
                         i, name, cn_tensor_str(all[i]->tensor, buf, sizeof buf));
            goto done;
        }
        for (int j = 0; j < i; j++)
            if (all[j]->tensor == all[i]->tensor) {
                cn_set_error(CN_ERR_INVALID_ARG, op,
                             "parameter %d ('%s') is also parameter %d; "
                             "give each parameter once, or it would be updated twice per step",
                             i, name, j);
                goto done;
            }
    }
    o = cn__calloc(op, 1, sizeof *o);
    if (!o) goto done;
    o->params = cn__calloc(op, (size_t)n, sizeof *o->params);
    o->state1 = cn__calloc(op, (size_t)n, sizeof *o->state1);
    o->state2 = cn__calloc(op, (size_t)n, sizeof *o->state2);
    o->steps = cn__calloc(op, (size_t)n, sizeof *o->steps);
    o->names = cn__calloc(op, (size_t)n, sizeof *o->names);
    o->lr_scale = cn__calloc(op, (size_t)n, sizeof *o->lr_scale);
    o->wd = cn__calloc(op, (size_t)n, sizeof *o->wd);
    if (!o->params || !o->state1 || !o->state2 || !o->steps || !o->names || !o->lr_scale ||
        !o->wd) {
        cn_optimizer_free(o);
        o = NULL;
        goto done;
    }
    o->n = n;
    for (int i = 0; i < n; i++) {
        char index[24];
        snprintf(index, sizeof index, "%d", i);
        if (!(o->names[i] = copy_string(op, all[i]->name ? all[i]->name : index))) {
            cn_optimizer_free(o);
            o = NULL;
            goto done;
        }
    }
    for (int gi = 0, k = 0; gi < n_groups; gi++)
        for (int j = 0; j < groups[gi].n; j++, k++) {
            const cn_param_group *g = &groups[gi];
            o->lr_scale[k] = g->lr == CN_GROUP_DEFAULT || lr == 0 ? 1.0 : g->lr / lr;
            o->wd[k] = g->weight_decay == CN_GROUP_DEFAULT ? weight_decay : g->weight_decay;
        }
    for (int i = 0; i < n; i++)
        o->params[i] = cn_retain(all[i]->tensor);
    o->kind = kind;
    o->lr = lr;
    o->weight_decay = weight_decay;
done:
    cn__free((void *)all);
    return o;
}

/* One group of every parameter, with the optimizer's settings. */
static cn_param_group one_group(const cn_param *params, int n) {
    return (cn_param_group){params, n, CN_GROUP_DEFAULT, CN_GROUP_DEFAULT};
}

cn_optimizer *cn_sgd_new_groups(const cn_param_group *groups, int n_groups, double lr,
                                double momentum, double dampening, int nesterov,
                                double weight_decay) {
    const char *op = "sgd_new";
    if (!(momentum >= 0) || !(dampening >= 0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "momentum = %g, dampening = %g; both must be >= 0",
                     momentum, dampening);
        return NULL;
    }
    if (nesterov && (momentum <= 0 || dampening != 0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "Nesterov momentum needs momentum > 0 and dampening "
                     "0 (got %g and %g)",
                     momentum, dampening);
        return NULL;
    }
    cn_optimizer *o = optimizer_new(op, OPT_SGD, groups, n_groups, lr, weight_decay);
    if (!o) return NULL;
    o->momentum = momentum;
    o->dampening = dampening;
    o->nesterov = nesterov != 0;
    return o;
}

cn_optimizer *cn_sgd_new(const cn_param *params, int n, double lr, double momentum,
                         double dampening, int nesterov, double weight_decay) {
    if (!params) {
        cn__null_arg("sgd_new", "params");
        return NULL;
    }
    cn_param_group g = one_group(params, n);
    return cn_sgd_new_groups(&g, 1, lr, momentum, dampening, nesterov, weight_decay);
}

cn_optimizer *cn_adamw_new_groups(const cn_param_group *groups, int n_groups, double lr,
                                  double beta1, double beta2, double eps, double weight_decay) {
    const char *op = "adamw_new";
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps >= 0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "beta1 = %g, beta2 = %g, eps = %g; the betas must be "
                     "in [0, 1) and eps >= 0 (PyTorch's defaults: 0.9, 0.999, 1e-8)",
                     beta1, beta2, eps);
        return NULL;
    }
    cn_optimizer *o = optimizer_new(op, OPT_ADAMW, groups, n_groups, lr, weight_decay);
    if (!o) return NULL;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    return o;
}

cn_optimizer *cn_adamw_new(const cn_param *params, int n, double lr, double beta1, double beta2,
                           double eps, double weight_decay) {
    if (!params) {
        cn__null_arg("adamw_new", "params");
        return NULL;
    }
    cn_param_group g = one_group(params, n);
    return cn_adamw_new_groups(&g, 1, lr, beta1, beta2, eps, weight_decay);
}

/* ---- the composed update rules ------------------------------------------------------------------
 * p, g: the parameter and its gradient (concrete views); s1, s2: the state so far (NULL before
 * the first step). Set the new parameter value and state; all results are scope-owned. SGD's
 * rule here is the fallback for backends without a fused sgd_step kernel. */

static void sgd_rule(const cn_optimizer *o, int i, cn_tensor *p, cn_tensor *g, cn_tensor *s1,
                     cn_tensor **new_p, cn_tensor **new_s1) {
    cn_tensor *d = g;
    if (wd_of(o, i) != 0) d = cn_add(d, cn_mul_scalar(p, wd_of(o, i)));
    if (o->momentum != 0) {
        cn_tensor *buf =
            s1 ? cn_add(cn_mul_scalar(s1, o->momentum), cn_mul_scalar(d, 1.0 - o->dampening))
               : cn_mul_scalar(d, 1.0); /* a copy: the buffer must not alias g */
        d = o->nesterov ? cn_add(d, cn_mul_scalar(buf, o->momentum)) : buf;
        *new_s1 = buf;
    }
    *new_p = cn_sub(p, cn_mul_scalar(d, lr_of(o, i)));
}

static void adamw_rule(const cn_optimizer *o, int i, int64_t step, cn_tensor *p, cn_tensor *g,
                       cn_tensor *s1, cn_tensor *s2, cn_tensor **new_p, cn_tensor **new_s1,
                       cn_tensor **new_s2) {
    const double b1 = o->beta1, b2 = o->beta2, lr = lr_of(o, i), wd = wd_of(o, i);
    cn_tensor *decayed = wd != 0 ? cn_mul_scalar(p, 1.0 - lr * wd) : p;
    cn_tensor *g1 = cn_mul_scalar(g, 1.0 - b1);
    cn_tensor *g2 = cn_mul_scalar(cn_mul(g, g), 1.0 - b2);
    cn_tensor *m = s1 ? cn_add(cn_mul_scalar(s1, b1), g1) : g1;
    cn_tensor *v = s2 ? cn_add(cn_mul_scalar(s2, b2), g2) : g2;
    double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    cn_tensor *denom = cn_add_scalar(cn_mul_scalar(cn_sqrt(v), 1.0 / sqrt(bc2)), o->eps);
    *new_p = cn_sub(decayed, cn_mul_scalar(cn_div(m, denom), lr / bc1));
    *new_s1 = m;
    *new_s2 = v;
}

/* ---- the step -------------------------------------------------------------------------------- */

/* What a step does to one parameter, decided before anything is written. All tensors here are
 * owned by the step's scope. */
typedef struct pending {
    cn_tensor *given;        /* the gradient in grads (borrowed); NULL: skipped */
    cn_tensor *inner, *grad; /* the concrete parameter and gradient */
    int fused;               /* through the backend's sgd_step or adamw_step kernel */
    cn_tensor *buf;          /* fused SGD: the momentum buffer (NULL without momentum; new on
                              * the first step); fused AdamW: exp_avg (new on the first step) */
    cn_tensor *buf2;         /* fused AdamW: exp_avg_sq (new on the first step) */
    cn_tensor *p, *s1, *s2;  /* composed: the new value and state */
} pending;

/* Computes parameter i's new value and state with composed ops into *out (kept in the caller's
 * scope). */
static cn_status compute_one(cn_optimizer *o, int i, cn_tensor *grad, pending *out) {
    if (cn_scope_begin() != CN_OK) return cn_last_status();
    cn_tensor *p = cn_inner(o->params[i]), *g = cn_inner(grad);
    cn_tensor *np = NULL, *s1 = NULL, *s2 = NULL;
    if (o->kind == OPT_SGD)
        sgd_rule(o, i, p, g, o->state1[i], &np, &s1);
    else
        adamw_rule(o, i, o->steps[i] + 1, p, g, o->state1[i], o->state2[i], &np, &s1, &s2);
    int needs_state = o->kind == OPT_ADAMW || o->momentum != 0;
    int ok = np && (!needs_state || s1) && (o->kind != OPT_ADAMW || s2);
    if (ok) {
        out->p = cn_keep(np);
        out->s1 = cn_keep(s1);
        out->s2 = cn_keep(s2);
    }
    cn_scope_end();
    return ok ? CN_OK : cn_last_status();
}

/* The gradient of parameter i must match it: a clear error, before anything is written. */
static cn_status check_grad(const char *op, int i, cn_tensor *p, cn_tensor *g) {
    cn_status s = CN_OK;
    if (cn_ndim(p) != cn_ndim(g) ||
        memcmp(cn_shape(p), cn_shape(g), sizeof(int64_t) * (size_t)cn_ndim(p)) != 0)
        s = CN_ERR_SHAPE;
    else if (cn_dtype_of(p) != cn_dtype_of(g))
        s = CN_ERR_DTYPE;
    else if (!cn_device_eq(cn_device_of(p), cn_device_of(g)))
        s = CN_ERR_DEVICE_MISMATCH;
    if (s == CN_OK) return CN_OK;
    char a[128], b[128];
    return cn_set_error(s, op,
                        "parameter %d is %s but its gradient is %s; a gradient has its "
                        "parameter's shape, dtype and device: pass the cn_grads of a cn_backward "
                        "through this parameter (reduce, cast or move an edited gradient back)",
                        i, cn_tensor_str(p, a, sizeof a), cn_tensor_str(g, b, sizeof b));
}

/* g, or a copy of it when it shares memory with a parameter about to be written: parameters are
 * written one after another by the fused steps (an extension's backward may hand back an input
 * as a gradient). NULL with the error when the copy fails. */
static cn_tensor *unshared_grad(const cn_optimizer *o, const pending *todo, cn_tensor *g) {
    for (int k = 0; k < o->n; k++)
        if (todo[k].given && cn_shares_memory(g, todo[k].inner)) return cn_clone(g);
    return g;
}

/* Prepares parameter i's fused SGD update in todo[i] (todo[i].fused stays 0 when the backend has
 * no sgd_step kernel for it). */
static cn_status prepare_sgd(cn_optimizer *o, int i, pending *todo) {
    pending *out = &todo[i];
    cn_tensor *p = out->inner, *g = out->grad;
    if (!(g = unshared_grad(o, todo, g))) return cn_last_status();
    cn_tensor *buf = NULL;
    if (o->momentum != 0) {
        buf = o->state1[i];
        if (!buf && !(buf = cn_empty(cn_shape(p), cn_ndim(p), cn_dtype_of(p), cn_device_of(p))))
            return cn_last_status(); /* the kernel writes it: first = 1 */
    }
    const cn_sgd_hyper h = {lr_of(o, i), o->momentum, o->dampening, wd_of(o, i), o->nesterov};
    cn_status s = cn_sgd_step_check(p, g, buf, &h);
    if (s == CN_SGD_UNFUSED) return CN_OK;
    if (s != CN_OK) return s;
    out->fused = 1;
    out->grad = g;
    out->buf = buf;
    return CN_OK;
}

/* Prepares parameter i's fused AdamW update in todo[i], as prepare_sgd does. */
static cn_status prepare_adamw(cn_optimizer *o, int i, pending *todo) {
    pending *out = &todo[i];
    cn_tensor *p = out->inner, *g = out->grad;
    if (!(g = unshared_grad(o, todo, g))) return cn_last_status();
    cn_tensor *m = o->state1[i], *v = o->state2[i];
    if (!m != !v) return CN_OK; /* one average without the other: the composed rule's case */
    /* the kernel writes new averages whole on the first step (first = 1) */
    if (!m && !(m = cn_empty(cn_shape(p), cn_ndim(p), cn_dtype_of(p), cn_device_of(p))))
        return cn_last_status();
    if (!v && !(v = cn_empty(cn_shape(p), cn_ndim(p), cn_dtype_of(p), cn_device_of(p))))
        return cn_last_status();
    const cn_adamw_hyper h = {lr_of(o, i), o->beta1, o->beta2, o->eps, wd_of(o, i),
                              o->steps[i] + 1};
    cn_status s = cn_adamw_step_check(p, g, m, v, &h);
    if (s == CN_SGD_UNFUSED) return CN_OK;
    if (s != CN_OK) return s;
    out->fused = 1;
    out->grad = g;
    out->buf = m;
    out->buf2 = v;
    return CN_OK;
}

/* Replaces a state tensor with a new one (owned by the step's scope) taken out of every scope;
 * a buffer updated in place is already in its slot. */
static void replace_state(cn_tensor **slot, cn_tensor *t) {
    if (!t || t == *slot) return;
    cn_release(*slot);
    *slot = nn_unscoped(t);
}

/* Checks and prepares every parameter's update; writes nothing. */
static cn_status prepare(cn_optimizer *o, const char *op, const cn_grads *grads, pending *todo) {
    for (int i = 0; i < o->n; i++) {
        pending *t = &todo[i];
        if (!(t->given = nn_grad_or_null(grads, o->params[i]))) continue;
        if (!(t->inner = cn_inner(o->params[i])) || !(t->grad = cn_inner(t->given)))
            return cn_last_status();
        cn_status s = check_grad(op, i, t->inner, t->grad);
        if (s != CN_OK) return s;
    }
    for (int i = 0; i < o->n; i++) {
        if (!todo[i].given) continue;
        cn_status s = o->kind == OPT_SGD ? prepare_sgd(o, i, todo) : prepare_adamw(o, i, todo);
        if (s == CN_OK && !todo[i].fused) s = compute_one(o, i, todo[i].given, &todo[i]);
        if (s != CN_OK) return s;
    }
    return CN_OK;
}

/* Writes parameter i and adopts its new state. Nothing here allocates or can fail a check that
 * prepare passed (the fused step re-runs the checks prepare_sgd ran; cn_copy_ gets a tensor of the
 * parameter's shape and dtype on its device, under no-grad), so once the first parameter is
 * written every other one is too: tests/test_alloc_sweep.c fails each allocation of whole training
 * steps in turn and finds the parameters and the state untouched every time. */
static cn_status apply(cn_optimizer *o, int i, const pending *t) {
    if (t->fused && o->kind == OPT_SGD) {
        const cn_sgd_hyper h = {lr_of(o, i), o->momentum, o->dampening, wd_of(o, i), o->nesterov};
        cn_status s = cn_sgd_step_(t->inner, t->grad, t->buf, &h, o->state1[i] == NULL);
        if (s != CN_OK) return s;
        replace_state(&o->state1[i], t->buf); /* a new buffer on the first step */
    } else if (t->fused) {
        const cn_adamw_hyper h = {lr_of(o, i), o->beta1, o->beta2, o->eps, wd_of(o, i),
                                  o->steps[i] + 1};
        cn_status s = cn_adamw_step_(t->inner, t->grad, t->buf, t->buf2, &h,
                                     o->state1[i] == NULL);
        if (s != CN_OK) return s;
        replace_state(&o->state1[i], t->buf); /* new averages on the first step */
        replace_state(&o->state2[i], t->buf2);
    } else {
        cn_status s = cn_copy_(o->params[i], t->p);
        if (s != CN_OK) return s;
        replace_state(&o->state1[i], t->s1);
        replace_state(&o->state2[i], t->s2);
    }
    o->steps[i]++;
    return CN_OK;
}

cn_status cn_optimizer_step(cn_optimizer *opt, const cn_grads *grads) {
    const char *op = "optimizer_step";
    if (!opt || !grads) {
        cn__null_arg(op, !opt ? "opt" : "grads");
        return cn_last_status();
    }
    pending *todo = cn__calloc(op, (size_t)opt->n, sizeof *todo);
    if (!todo) return CN_ERR_OUT_OF_MEMORY;
    view_clear(opt); /* what cn_optimizer_state handed out is about to be stale */
    if (cn_scope_begin() != CN_OK) {
        cn__free(todo);
        return cn_last_status();
    }
    cn_no_grad_begin();
    cn_status s = prepare(opt, op, grads, todo);
    /* everything is checked and computed: write the parameters */
    for (int i = 0; i < opt->n && s == CN_OK; i++)
        if (todo[i].given) s = apply(opt, i, &todo[i]);
    cn_no_grad_end();
    cn_scope_end();
    cn__free(todo);
    return s;
}

/* ---- state: naming, handing out, loading
 * --------------------------------------------------------- A parameter's state is named
 * "<param>.<key>" (nn.h), the keys PyTorch's optimizers use in their state_dict. The buffers are
 * handed out as they are (concrete, owned by the optimizer); AdamW's step count goes out as a new
 * i64 0-d tensor on the CPU. */

static const char *const sgd_keys[] = {"momentum_buffer"};
static const char *const adamw_keys[] = {"exp_avg", "exp_avg_sq", "step"};
#define ADAMW_STEP 2 /* adamw_keys[ADAMW_STEP] is the count, not a buffer */

/* The keys of o's kind (none for SGD without momentum); their number. */
static int state_keys(const cn_optimizer *o, const char *const **keys) {
    if (o->kind == OPT_ADAMW) {
        *keys = adamw_keys;
        return 3;
    }
    *keys = sgd_keys;
    return o->momentum != 0 ? 1 : 0;
}

/* Whether parameter i has state to hand out. */
static int has_state(const cn_optimizer *o, int i) {
    return o->kind == OPT_ADAMW ? o->steps[i] > 0 && o->state1[i] && o->state2[i]
                                : o->momentum != 0 && o->state1[i] != NULL;
}

static void view_clear(cn_optimizer *o) {
    for (int k = 0; k < o->view_count; k++) {
        cn__free((char *)o->view[k].name);
        cn_release(o->view[k].tensor);
    }
    cn__free(o->view);
    o->view = NULL;
    o->view_count = 0;
}

/* State names must tell the parameters apart: CN_ERR_INVALID_ARG when two share a name. */
static cn_status check_unique_names(const cn_optimizer *o, const char *op) {
    for (int i = 0; i < o->n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(o->names[i], o->names[j]))
                return cn_set_error(CN_ERR_INVALID_ARG, op,
                                    "parameters %d and %d are both named '%s', so their state "
                                    "could not be told apart; give the optimizer parameters with "
                                    "distinct names (cn_module_params gives them)",
                                    j, i, o->names[i]);
    return CN_OK;
}

/* "<param>.<key>", allocated; NULL with the error set. */
static char *state_name(const char *op, const char *param, const char *key) {
    size_t a = strlen(param), b = strlen(key);
    char *s = cn__malloc(op, a + b + 2);
    if (!s) return NULL;
    memcpy(s, param, a);
    s[a] = '.';
    memcpy(s + a + 1, key, b + 1);
    return s;
}

const cn_param *cn_optimizer_state(cn_optimizer *opt, int *count) {
    const char *op = "optimizer_state";
    if (count) *count = 0;
    if (!opt || !count) {
        cn__null_arg(op, !opt ? "opt" : "count");
        return NULL;
    }
    if (check_unique_names(opt, op) != CN_OK) return NULL;
    view_clear(opt);
    const char *const *keys;
    int per = state_keys(opt, &keys), total = 0;
    for (int i = 0; i < opt->n; i++)
        total += has_state(opt, i) ? per : 0;
    cn_param *view = cn__calloc(op, total ? (size_t)total : 1, sizeof *view);
    if (!view) return NULL;
    int k = 0;
    cn_status s = CN_OK;
    for (int i = 0; i < opt->n && s == CN_OK; i++) {
        if (!has_state(opt, i)) continue;
        for (int j = 0; j < per && s == CN_OK; j++) {
            cn_tensor *t = NULL;
            if (opt->kind == OPT_ADAMW && j == ADAMW_STEP)
                t = nn_unscoped(cn_from_data(&opt->steps[i], NULL, 0, CN_I64, cn_cpu()));
            else
                t = cn_retain(j == 0 ? opt->state1[i] : opt->state2[i]);
            char *name = t ? state_name(op, opt->names[i], keys[j]) : NULL;
            if (!name) {
                cn_release(t);
                s = cn_last_status();
                break;
            }
            view[k].name = name;
            view[k].tensor = t;
            k++;
        }
    }
    opt->view = view;
    opt->view_count = k;
    if (s != CN_OK) {
        view_clear(opt);
        return NULL;
    }
    *count = k;
    return view;
}

/* What a load found for parameter i: the given tensors for each key (borrowed), then the
 * prepared copies (owned, in no scope). */
typedef struct staged {
    cn_tensor *given[3];
    cn_tensor *s1, *s2;
    int64_t step;
} staged;

/* Which parameter and key `name` is: *param and *key set, or CN_ERR_INVALID_ARG explaining. */
static cn_status parse_state_name(const cn_optimizer *o, const char *op, const char *name,
                                  int *param, int *key) {
    const char *const *keys;
    int per = state_keys(o, &keys);
    for (int i = 0; i < o->n; i++) {
        size_t len = strlen(o->names[i]);
        if (strncmp(name, o->names[i], len) != 0 || name[len] != '.') continue;
        for (int j = 0; j < per; j++)
            if (!strcmp(name + len + 1, keys[j])) {
                *param = i;
                *key = j;
                return CN_OK;
            }
    }
    const char *dot = strrchr(name, '.');
    const char *suffix = dot ? dot + 1 : name;
    const char *kind = o->kind == OPT_ADAMW ? "AdamW" : "SGD";
    if (o->kind == OPT_SGD &&
        (!strcmp(suffix, "exp_avg") || !strcmp(suffix, "exp_avg_sq") || !strcmp(suffix, "step")))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "state '%s' is AdamW's, but this optimizer is SGD; load it into an "
                            "optimizer made with cn_adamw_new",
                            name);
    if (o->kind == OPT_ADAMW && !strcmp(suffix, "momentum_buffer"))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "state '%s' is SGD's, but this optimizer is AdamW; load it into an "
                            "optimizer made with cn_sgd_new",
                            name);
    if (o->kind == OPT_SGD && o->momentum == 0 && !strcmp(suffix, "momentum_buffer"))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "state '%s' is a momentum buffer, but this SGD has momentum 0 and "
                            "keeps no state; make the optimizer with the momentum of the run that "
                            "saved it",
                            name);
    return cn_set_error(CN_ERR_INVALID_ARG, op,
                        "state '%s' names no parameter of this %s optimizer (its state is "
                        "'<parameter>.<%s>', the parameters '%s'%s); give the optimizer the "
                        "parameters of the model that saved it, named alike",
                        name, kind, per ? keys[0] : "none", o->names[0], o->n > 1 ? ", ..." : "");
}

/* Checks state[k] against parameter i's key j, filling st[i].given[j]. */
static cn_status check_state_tensor(const cn_optimizer *o, const char *op, const cn_param *e, int i,
                                    int j, staged *st) {
    char a[128], b[128];
    if (st[i].given[j])
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "state '%s' is given twice; give each state tensor once", e->name);
    cn_tensor *t = e->tensor, *p = o->params[i];
    if (o->kind == OPT_ADAMW && j == ADAMW_STEP) {
        double v = NAN;
        cn_status s = cn_scope_begin();
        if (s != CN_OK) return s;
        cn_tensor *f = cn_ndim(t) == 0 ? cn_cast(t, CN_F64) : NULL;
        if (cn_ndim(t) == 0) s = f ? cn_read(f, &v, sizeof v) : cn_last_status();
        cn_scope_end();
        if (s != CN_OK) return s;
        if (!(v >= 1 && v <= 9007199254740992.0 && v == floor(v)))
            return cn_set_error(CN_ERR_INVALID_ARG, op,
                                "state '%s' is %s; a step count is a 0-d tensor holding a whole "
                                "number >= 1 (the steps the parameter has taken)",
                                e->name, cn_tensor_str(t, a, sizeof a));
        st[i].step = (int64_t)v;
    } else if (cn_ndim(t) != cn_ndim(p) ||
               memcmp(cn_shape(t), cn_shape(p), sizeof(int64_t) * (size_t)cn_ndim(p)) != 0) {
        return cn_set_error(CN_ERR_SHAPE, op,
                            "state '%s' is %s but its parameter is %s; a state buffer has its "
                            "parameter's shape: load the state of the same model",
                            e->name, cn_tensor_str(t, a, sizeof a), cn_tensor_str(p, b, sizeof b));
    } else if (cn_dtype_of(t) != cn_dtype_of(p)) {
        return cn_set_error(CN_ERR_DTYPE, op,
                            "state '%s' is %s but its parameter is %s; cn_cast the state to the "
                            "parameter's dtype first",
                            e->name, cn_tensor_str(t, a, sizeof a), cn_tensor_str(p, b, sizeof b));
    }
    st[i].given[j] = t;
    return CN_OK;
}

/* A copy of t with storage of its own on dev, owned by no scope; NULL with the error set. */
static cn_tensor *own_copy(cn_tensor *t, cn_device dev) {
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *c = cn_keep(cn_clone(cn_to_device(t, dev)));
    cn_scope_end();
    return nn_unscoped(c);
}

/* Checks every entry and prepares every copy into st; changes nothing in o. */
static cn_status stage_state(cn_optimizer *o, const char *op, const cn_param *state, int n,
                             staged *st) {
    const char *const *keys;
    int per = state_keys(o, &keys);
    for (int k = 0; k < n; k++) {
        if (!state[k].name || !state[k].tensor) {
            char arg[40];
            snprintf(arg, sizeof arg, "state[%d].%s", k, !state[k].name ? "name" : "tensor");
            cn__null_arg(op, arg);
            return cn_last_status();
        }
        int i = 0, j = 0;
        cn_status s = parse_state_name(o, op, state[k].name, &i, &j);
        if (s == CN_OK) s = check_state_tensor(o, op, &state[k], i, j, st);
        if (s != CN_OK) return s;
    }
    for (int i = 0; i < o->n; i++) {
        int got = 0, missing = -1;
        for (int j = 0; j < per; j++) {
            if (st[i].given[j])
                got++;
            else if (missing < 0)
                missing = j;
        }
        if (got != 0 && got != per)
            return cn_set_error(CN_ERR_INVALID_ARG, op,
                                "parameter '%s' has part of its state: '%s.%s' is missing; give "
                                "all of a parameter's state or none (none: it starts afresh)",
                                o->names[i], o->names[i], keys[missing]);
    }
    for (int i = 0; i < o->n; i++) {
        if (!st[i].given[0]) continue;
        cn_device dev = cn_inner_device(cn_device_of(o->params[i]));
        if (!(st[i].s1 = own_copy(st[i].given[0], dev))) return cn_last_status();
        if (o->kind == OPT_ADAMW && !(st[i].s2 = own_copy(st[i].given[1], dev)))
            return cn_last_status();
    }
    return CN_OK;
}

cn_status cn_optimizer_load_state(cn_optimizer *opt, const cn_param *state, int n) {
    const char *op = "optimizer_load_state";
    if (!opt || (n > 0 && !state)) {
        cn__null_arg(op, !opt ? "opt" : "state");
        return cn_last_status();
    }
    if (n < 0) return cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; it must be >= 0", n);
    cn_status s = check_unique_names(opt, op);
    if (s != CN_OK) return s;
    staged *st = cn__calloc(op, (size_t)opt->n, sizeof *st);
    if (!st) return CN_ERR_OUT_OF_MEMORY;
    cn_no_grad_begin();
    s = stage_state(opt, op, state, n, st);
    cn_no_grad_end();
    if (s == CN_OK) { /* everything is checked and copied: swap it in */
        view_clear(opt);
        for (int i = 0; i < opt->n; i++) {
            cn_release(opt->state1[i]);
            cn_release(opt->state2[i]);
            opt->state1[i] = st[i].s1;
            opt->state2[i] = st[i].s2;
            opt->steps[i] = opt->kind == OPT_ADAMW ? st[i].step : st[i].s1 != NULL;
            st[i].s1 = st[i].s2 = NULL;
        }
    }
    for (int i = 0; i < opt->n; i++) {
        cn_release(st[i].s1);
        cn_release(st[i].s2);
    }
    cn__free(st);
    return s;
}

/* ---- learning rate and lifetime -------------------------------------------------------------- */

cn_status cn_optimizer_set_lr(cn_optimizer *opt, double lr) {
    if (!opt) {
        cn__null_arg("optimizer_set_lr", "opt");
        return cn_last_status();
    }
    if (!(lr >= 0))
        return cn_set_error(CN_ERR_INVALID_ARG, "optimizer_set_lr", "lr = %g; it must be >= 0", lr);
    opt->lr = lr;
    return CN_OK;
}

double cn_optimizer_get_lr(const cn_optimizer *opt) { return opt ? opt->lr : NAN; }

void cn_optimizer_free(cn_optimizer *opt) {
    if (!opt) return;
    view_clear(opt);
    for (int i = 0; i < opt->n; i++) {
        cn_release(opt->params[i]);
        cn_release(opt->state1[i]);
        cn_release(opt->state2[i]);
        if (opt->names) cn__free(opt->names[i]);
    }
    cn__free(opt->names);
    cn__free(opt->params);
    cn__free(opt->state1);
    cn__free(opt->state2);
    cn__free(opt->steps);
    cn__free(opt->lr_scale);
    cn__free(opt->wd);
    cn__free(opt);
}
