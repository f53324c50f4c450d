/* Optimizers: SGD (momentum, Nesterov, weight decay) and AdamW, with PyTorch's update rules. A
 * step computes every new value first, on the concrete tensors under the parameters and under
 * no-grad mode, then writes them into the parameters with cn_copy_. State tensors (momentum
 * buffers, Adam's moments) are concrete and owned by no scope: only the optimizer frees them. */
#include <math.h>

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
    int64_t *steps;     /* AdamW: the steps in which each parameter had a gradient */
};

/* ---- construction ---------------------------------------------------------------------------- */

static cn_optimizer *optimizer_new(const char *op, opt_kind kind, const cn_param *params, int n,
                                   double lr, double weight_decay) {
    if (!params) {
        cn__null_arg(op, "params");
        return NULL;
    }
    if (n < 1) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; an optimizer needs at least one parameter",
                     n);
        return NULL;
    }
    if (!(lr >= 0) || !(weight_decay >= 0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "lr = %g, weight_decay = %g; both must be >= 0", lr,
                     weight_decay);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const char *name = params[i].name ? params[i].name : "(unnamed)";
        if (!params[i].tensor) {
            cn__null_arg(op, "params[i].tensor");
            return NULL;
        }
        if (cn_kind_of(params[i].tensor) != CN_KIND_FLOAT) {
            char buf[128];
            cn_set_error(CN_ERR_KIND, op,
                         "parameter %d ('%s') is %s; optimizers update float "
                         "tensors",
                         i, name, cn_tensor_str(params[i].tensor, buf, sizeof buf));
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (params[j].tensor == params[i].tensor) {
                cn_set_error(CN_ERR_INVALID_ARG, op,
                             "parameter %d ('%s') is also parameter %d; "
                             "give each parameter once, or it would be updated twice per step",
                             i, name, j);
                return NULL;
            }
    }
    cn_optimizer *o = cn__calloc(op, 1, sizeof *o);
    if (!o) return NULL;
    o->params = cn__calloc(op, (size_t)n, sizeof *o->params);
    o->state1 = cn__calloc(op, (size_t)n, sizeof *o->state1);
    o->state2 = cn__calloc(op, (size_t)n, sizeof *o->state2);
    o->steps = cn__calloc(op, (size_t)n, sizeof *o->steps);
    if (!o->params || !o->state1 || !o->state2 || !o->steps) {
        cn_optimizer_free(o);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        o->params[i] = cn_retain(params[i].tensor);
    o->n = n;
    o->kind = kind;
    o->lr = lr;
    o->weight_decay = weight_decay;
    return o;
}

cn_optimizer *cn_sgd_new(const cn_param *params, int n, double lr, double momentum,
                         double dampening, int nesterov, double weight_decay) {
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
    cn_optimizer *o = optimizer_new(op, OPT_SGD, params, n, lr, weight_decay);
    if (!o) return NULL;
    o->momentum = momentum;
    o->dampening = dampening;
    o->nesterov = nesterov != 0;
    return o;
}

cn_optimizer *cn_adamw_new(const cn_param *params, int n, double lr, double beta1, double beta2,
                           double eps, double weight_decay) {
    const char *op = "adamw_new";
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(eps >= 0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "beta1 = %g, beta2 = %g, eps = %g; the betas must be "
                     "in [0, 1) and eps >= 0 (PyTorch's defaults: 0.9, 0.999, 1e-8)",
                     beta1, beta2, eps);
        return NULL;
    }
    cn_optimizer *o = optimizer_new(op, OPT_ADAMW, params, n, lr, weight_decay);
    if (!o) return NULL;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    return o;
}

/* ---- the update rules ---------------------------------------------------------------------------
 * p, g: the parameter and its gradient (concrete views); s1, s2: the state so far (NULL before
 * the first step). Set the new parameter value and state; all results are scope-owned. */

static void sgd_rule(const cn_optimizer *o, cn_tensor *p, cn_tensor *g, cn_tensor *s1,
                     cn_tensor **new_p, cn_tensor **new_s1) {
    cn_tensor *d = g;
    if (o->weight_decay != 0) d = cn_add(d, cn_mul_scalar(p, o->weight_decay));
    if (o->momentum != 0) {
        cn_tensor *buf =
            s1 ? cn_add(cn_mul_scalar(s1, o->momentum), cn_mul_scalar(d, 1.0 - o->dampening))
               : cn_mul_scalar(d, 1.0); /* a copy: the buffer must not alias g */
        d = o->nesterov ? cn_add(d, cn_mul_scalar(buf, o->momentum)) : buf;
        *new_s1 = buf;
    }
    *new_p = cn_sub(p, cn_mul_scalar(d, o->lr));
}

static void adamw_rule(const cn_optimizer *o, int64_t step, cn_tensor *p, cn_tensor *g,
                       cn_tensor *s1, cn_tensor *s2, cn_tensor **new_p, cn_tensor **new_s1,
                       cn_tensor **new_s2) {
    const double b1 = o->beta1, b2 = o->beta2;
    cn_tensor *decayed = o->weight_decay != 0 ? cn_mul_scalar(p, 1.0 - o->lr * o->weight_decay) : p;
    cn_tensor *g1 = cn_mul_scalar(g, 1.0 - b1);
    cn_tensor *g2 = cn_mul_scalar(cn_mul(g, g), 1.0 - b2);
    cn_tensor *m = s1 ? cn_add(cn_mul_scalar(s1, b1), g1) : g1;
    cn_tensor *v = s2 ? cn_add(cn_mul_scalar(s2, b2), g2) : g2;
    double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    cn_tensor *denom = cn_add_scalar(cn_mul_scalar(cn_sqrt(v), 1.0 / sqrt(bc2)), o->eps);
    *new_p = cn_sub(decayed, cn_mul_scalar(cn_div(m, denom), o->lr / bc1));
    *new_s1 = m;
    *new_s2 = v;
}

/* ---- the step -------------------------------------------------------------------------------- */

typedef struct pending {
    cn_tensor *p, *s1, *s2; /* new values, owned by the step's scope; p NULL: skipped */
} pending;

/* Computes parameter i's new value and state into *out (kept in the caller's scope). */
static cn_status compute_one(cn_optimizer *o, int i, cn_tensor *grad, pending *out) {
    if (cn_scope_begin() != CN_OK) return cn_last_status();
    cn_tensor *p = cn_inner(o->params[i]), *g = cn_inner(grad);
    cn_tensor *np = NULL, *s1 = NULL, *s2 = NULL;
    if (o->kind == OPT_SGD)
        sgd_rule(o, p, g, o->state1[i], &np, &s1);
    else
        adamw_rule(o, o->steps[i] + 1, p, g, o->state1[i], o->state2[i], &np, &s1, &s2);
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

/* Replaces a state tensor with a new one taken out of every scope. */
static void replace_state(cn_tensor **slot, cn_tensor *t) {
    if (!t) return;
    cn_release(*slot);
    *slot = nn_unscoped(t);
}

cn_status cn_optimizer_step(cn_optimizer *opt, const cn_grads *grads) {
    const char *op = "optimizer_step";
    if (!opt || !grads) {
        cn__null_arg(op, !opt ? "opt" : "grads");
        return cn_last_status();
    }
    pending *todo = cn__calloc(op, (size_t)opt->n, sizeof *todo);
    if (!todo) return CN_ERR_OUT_OF_MEMORY;
    if (cn_scope_begin() != CN_OK) {
        cn__free(todo);
        return cn_last_status();
    }
    cn_no_grad_begin();
    cn_status s = CN_OK;
    for (int i = 0; i < opt->n && s == CN_OK; i++) {
        cn_tensor *g = nn_grad_or_null(grads, opt->params[i]);
        if (g) s = compute_one(opt, i, g, &todo[i]);
    }
    /* everything is computed: write the parameters, then adopt the new state */
    for (int i = 0; i < opt->n && s == CN_OK; i++)
        if (todo[i].p) s = cn_copy_(opt->params[i], todo[i].p);
    for (int i = 0; i < opt->n && s == CN_OK; i++) {
        if (!todo[i].p) continue;
        replace_state(&opt->state1[i], todo[i].s1);
        replace_state(&opt->state2[i], todo[i].s2);
        opt->steps[i]++;
    }
    cn_no_grad_end();
    cn_scope_end();
    cn__free(todo);
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
    for (int i = 0; i < opt->n; i++) {
        cn_release(opt->params[i]);
        cn_release(opt->state1[i]);
        cn_release(opt->state2[i]);
    }
    cn__free(opt->params);
    cn__free(opt->state1);
    cn__free(opt->state2);
    cn__free(opt->steps);
    cn__free(opt);
}
